//! Who moved an attempt (the `transition_source` domain).

use serde::Serialize;

use crate::words::words;

words! {
    /// Who moved an attempt; kept on every timeline row.
    #[derive(Serialize, utoipa::ToSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum Source {
        Api => "api",
        ProviderResponse => "provider_response",
        Webhook => "webhook",
        Reconciler => "reconciler",
        Support => "support",
    }
}

impl Source {
    /// As an SQL literal, for a statement whose source is fixed.
    pub fn sql(self) -> String {
        format!("'{}'", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Source;

    /// Sources are written, never parsed back: the round trip is through `ALL`.
    #[test]
    fn every_source_has_a_word_of_its_own() {
        for source in Source::ALL {
            let back = Source::ALL
                .into_iter()
                .filter(|s| s.as_str() == source.as_str());
            assert_eq!(back.collect::<Vec<_>>(), vec![source]);
        }
    }
}

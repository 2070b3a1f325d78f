//! Who moved an attempt (the `transition_source` domain).

use serde::Serialize;

/// Who moved an attempt; kept on every timeline row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Api,
    ProviderResponse,
    Webhook,
    Reconciler,
    Support,
}

impl Source {
    /// Every source, for the tests that hold the `transition_source` domain to it.
    pub const ALL: [Source; 5] = [
        Source::Api,
        Source::ProviderResponse,
        Source::Webhook,
        Source::Reconciler,
        Source::Support,
    ];

    /// As an SQL literal, for a statement whose source is fixed.
    pub fn sql(self) -> String {
        format!("'{}'", self.as_str())
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Api => "api",
            Source::ProviderResponse => "provider_response",
            Source::Webhook => "webhook",
            Source::Reconciler => "reconciler",
            Source::Support => "support",
        }
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

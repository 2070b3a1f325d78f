//! `/console`: the support console (docs/guides/support.md, "Support"): one HTML file, one script and one
//! stylesheet (see [`super::assets`]). The page talks to the support API with the key the
//! user enters; it holds no data of its own.

use actix_web::HttpResponse;

use super::assets::{asset, HTML, SCRIPT, STYLE};

pub(crate) async fn page() -> HttpResponse {
    asset(HTML, include_str!("console/console.html"))
}

pub(crate) async fn script() -> HttpResponse {
    asset(SCRIPT, include_str!("console/console.js"))
}

pub(crate) async fn style() -> HttpResponse {
    asset(STYLE, include_str!("console/console.css"))
}

#[cfg(test)]
mod tests {
    use crate::payments::AttemptStatus;

    /// The page takes its statuses from the API's document; each still needs its colours
    /// here, or its bars would be drawn unseen.
    #[test]
    fn every_status_has_its_colours() {
        let css = include_str!("console/console.css");
        for status in AttemptStatus::ALL.map(AttemptStatus::as_str) {
            assert!(
                css.contains(&format!("rect.{status}, .swatch.{status} {{"))
                    && css.contains(&format!(".status.{status}")),
                "console.css has no colours for {status}"
            );
        }
    }
}

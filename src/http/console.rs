//! `/console`: the support console (README, "Support"): one HTML file, one script and one
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

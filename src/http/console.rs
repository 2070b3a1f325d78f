//! `/console`: the support console, a page payorch serves itself (README, "Support"): one
//! HTML file, one script and one stylesheet compiled into the binary, so it works offline,
//! with no CDN and no build step. The page talks to the support API with the key the user
//! enters; it holds no data of its own.

use actix_web::http::header;
use actix_web::HttpResponse;

const HTML: &str = include_str!("console/console.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// Only the page's own script and style run, nothing from elsewhere, and no other site may
/// frame it.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
                      frame-ancestors 'none'";

fn serve(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CONTENT_SECURITY_POLICY, POLICY))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(body)
}

pub(crate) async fn page() -> HttpResponse {
    serve("text/html; charset=utf-8", HTML)
}

pub(crate) async fn script() -> HttpResponse {
    serve("text/javascript; charset=utf-8", SCRIPT)
}

pub(crate) async fn style() -> HttpResponse {
    serve("text/css; charset=utf-8", STYLE)
}

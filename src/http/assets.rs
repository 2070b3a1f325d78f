//! The files of the pages payorch serves itself (`/console`, `/checkout`, `/docs`): compiled
//! into the binary, so they work offline with no CDN and no build step, and served under a
//! strict Content-Security-Policy.

use actix_web::http::header;
use actix_web::HttpResponse;

/// Only the page's own script and style run, nothing from elsewhere, and no other site may
/// frame it.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
                      frame-ancestors 'none'";

pub(crate) fn asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CONTENT_SECURITY_POLICY, POLICY))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(body)
}

/// An HTML page made for one request, under the same policy; never kept by a cache, since
/// it shows something as it is now.
pub(crate) fn made_page(body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(HTML)
        .insert_header((header::CONTENT_SECURITY_POLICY, POLICY))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(body)
}

/// A file whose path names its version or its content, so it never changes under that path:
/// a cache keeps it a year without asking again (the vendored viewer of `/docs`).
pub(crate) fn immutable(content_type: &'static str, body: &'static [u8]) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CONTENT_SECURITY_POLICY, POLICY))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
        .body(body)
}

pub(crate) const HTML: &str = "text/html; charset=utf-8";
pub(crate) const SCRIPT: &str = "text/javascript; charset=utf-8";
pub(crate) const STYLE: &str = "text/css; charset=utf-8";

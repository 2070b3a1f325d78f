//! `/docs`: the API reference, payorch's OpenAPI document (`/openapi.json`, [`super::api`])
//! shown by Swagger UI (docs/guides/api-reference.md). The viewer is vendored as published
//! (`api_reference/vendor/`, with its licence and where it came from) and compiled into the
//! binary, so the page works offline with no file on disk. It renders under the pages' policy
//! unchanged ([`super::assets`]): no inline script (our settings are `docs.js`), and the
//! `data:` images of its stylesheet are served from paths of their own ([`inline_images`]).
//!
//! The page and our own two files are asked for again on each load, like the console's; the
//! viewer's files, under a path that names its version, and the images, named by their
//! content, never change under their path, so caches keep them ([`super::assets::immutable`]).

mod inline_images;

use std::sync::LazyLock;

use actix_web::{web, HttpResponse};

use super::assets::{asset, immutable, HTML, SCRIPT, STYLE};
use super::errors::ApiError;
use inline_images::InlineImages;

/// The vendored viewer's folder, also the part of `/docs/assets/` its files are served under.
const VIEWER: &str = "swagger-ui-dist-5.35.0";
const VIEWER_SCRIPT: &[u8] =
    include_bytes!("api_reference/vendor/swagger-ui-dist-5.35.0/swagger-ui-bundle.js");
const VIEWER_STYLE: &str =
    include_str!("api_reference/vendor/swagger-ui-dist-5.35.0/swagger-ui.css");
/// Where the images of the viewer's stylesheet are served, each under its name.
const IMAGES: &str = "/docs/assets/images/";

static LIFTED: LazyLock<InlineImages> = LazyLock::new(|| inline_images::lift(VIEWER_STYLE, IMAGES));

pub(crate) async fn page() -> HttpResponse {
    asset(HTML, include_str!("api_reference/docs.html"))
}

/// Our settings of the viewer: which document, and nothing from the network.
pub(crate) async fn script() -> HttpResponse {
    asset(SCRIPT, include_str!("api_reference/docs.js"))
}

/// The viewer's declarations that held a `data:` image, pointing at payorch's paths.
pub(crate) async fn images_style() -> HttpResponse {
    asset(STYLE, LIFTED.css.as_str())
}

/// A file under `/docs/assets/`: the viewer's or an image.
pub(crate) async fn file(path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (content_type, body) = served(&path).ok_or(ApiError::NotFound("route"))?;
    Ok(immutable(content_type, body))
}

/// What `/docs/assets/{path}` serves: its content type and bytes.
fn served(path: &str) -> Option<(&'static str, &'static [u8])> {
    if let Some(name) = path.strip_prefix("images/") {
        let image = LIFTED.image(name)?;
        return Some((image.content_type, image.bytes.as_slice()));
    }
    match path.strip_prefix(VIEWER)?.strip_prefix('/')? {
        "swagger-ui-bundle.js" => Some((SCRIPT, VIEWER_SCRIPT)),
        "swagger-ui.css" => Some((STYLE, VIEWER_STYLE.as_bytes())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    /// The vendored files are the published ones: each has the SHA-256 its README records,
    /// taken from the tarball whose npm integrity the README names.
    #[test]
    fn the_vendored_files_are_as_published() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/http/api_reference/vendor")
            .join(VIEWER);
        let readme = std::fs::read_to_string(folder.join("README.md")).unwrap();
        let recorded: Vec<(&str, &str)> = readme
            .lines()
            .filter_map(|line| line.trim().split_once("  "))
            .filter(|(hash, _)| hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit()))
            .collect();
        let mut files: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name != "README.md")
            .collect();
        files.sort();
        let mut named: Vec<String> = recorded.iter().map(|(_, f)| f.to_string()).collect();
        named.sort();
        assert_eq!(files, named, "the README lists every vendored file");
        for (hash, file) in recorded {
            let bytes = std::fs::read(folder.join(file)).unwrap();
            let digest: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(digest, hash, "{file} is not the published file");
        }
    }

    /// Everything the page loads is served here: nothing comes from elsewhere.
    #[test]
    fn the_page_loads_only_what_payorch_serves() {
        let page = include_str!("api_reference/docs.html");
        let mut loaded = 0;
        for attribute in ["src=\"", "href=\""] {
            for (at, _) in page.match_indices(attribute) {
                let url = page[at + attribute.len()..].split('"').next().unwrap();
                loaded += 1;
                let ok = match url {
                    "/docs/docs.js" | "/docs/images.css" | "/openapi.json" => true,
                    other => other
                        .strip_prefix("/docs/assets/")
                        .and_then(served)
                        .is_some(),
                };
                assert!(ok, "the page loads {url}, which payorch does not serve");
            }
        }
        assert_eq!(loaded, 5);
    }

    /// The viewer's stylesheet loads no font and nothing from another site, and every image
    /// it has as a `data:` URL is served from a path of payorch's.
    #[test]
    fn the_viewer_style_needs_nothing_but_its_lifted_images() {
        assert!(!VIEWER_STYLE.contains("@import") && !VIEWER_STYLE.contains("@font-face"));
        let urls: Vec<&str> = VIEWER_STYLE
            .match_indices("url(")
            .map(|(at, _)| VIEWER_STYLE[at + 4..].trim_start_matches(['"', '\'']))
            .collect();
        assert!(
            urls.iter().all(|url| url.starts_with("data:")),
            "the viewer's stylesheet loads something other than a data: URL"
        );
        assert_eq!(
            LIFTED.css.matches(&format!("url(\"{IMAGES}")).count(),
            urls.len(),
            "a data: URL was not lifted:\n{}",
            LIFTED.css
        );
        assert!(!LIFTED.css.contains("data:"));
        for image in &LIFTED.images {
            let (content_type, bytes) = served(&format!("images/{}", image.name)).unwrap();
            assert_eq!(content_type, image.content_type);
            assert!(!bytes.is_empty());
        }
    }
}

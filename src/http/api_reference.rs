//! `/docs`: the API reference, payorch's OpenAPI document (`/openapi.json`, [`super::api`])
//! shown by Swagger UI (docs/guides/api-reference.md). The viewer is vendored as published
//! (`api_reference/vendor/`, with its licence and where it came from) and compiled into the
//! binary, so the page works offline with no file on disk. It renders under the pages' policy
//! unchanged ([`super::assets`]): no inline script (our settings are `docs.js`), and the
//! viewer's stylesheet is served with its `data:` images replaced by paths of payorch's
//! ([`inline_images`]).
//!
//! The page and our settings are asked for again on each load, like the console's; the
//! viewer's script, under a path that names its version, and the rewritten stylesheet and
//! its images, each named by its content, never change under their path, so caches keep
//! them ([`super::assets::immutable`]).

mod inline_images;

use std::sync::LazyLock;

use actix_web::{web, HttpResponse};

use super::assets::{asset, immutable, HTML, SCRIPT, STYLE};
use super::errors::ApiError;
use inline_images::Rewritten;

/// The vendored viewer's folder, also the part of `/docs/assets/` its files are served under.
const VIEWER: &str = "swagger-ui-dist-5.35.0";
const VIEWER_SCRIPT: &[u8] =
    include_bytes!("api_reference/vendor/swagger-ui-dist-5.35.0/swagger-ui-bundle.js");
const VIEWER_STYLE: &str =
    include_str!("api_reference/vendor/swagger-ui-dist-5.35.0/swagger-ui.css");
/// Where the images of the viewer's stylesheet are served, each under its name.
const IMAGES: &str = "/docs/assets/images/";

/// The viewer's stylesheet with payorch's paths for its images, made once.
static STYLESHEET: LazyLock<Rewritten> =
    LazyLock::new(|| inline_images::rewrite(VIEWER_STYLE, IMAGES));

/// The rewritten stylesheet's name under the viewer's folder, after its content: a change to
/// the viewer or to the rewriting is a new path, so it can be cached as immutable.
static STYLESHEET_NAME: LazyLock<String> = LazyLock::new(|| {
    let hash = inline_images::short_hash(STYLESHEET.css.as_bytes());
    format!("swagger-ui.{hash}.css")
});

/// The page, naming the stylesheet by its current name.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    let path = format!("/docs/assets/{VIEWER}/{}", *STYLESHEET_NAME);
    include_str!("api_reference/docs.html").replace("{stylesheet}", &path)
});

pub(crate) async fn page() -> HttpResponse {
    asset(HTML, PAGE.as_str())
}

/// Our settings of the viewer: which document, and nothing from the network.
pub(crate) async fn script() -> HttpResponse {
    asset(SCRIPT, include_str!("api_reference/docs.js"))
}

/// A file under `/docs/assets/`: the viewer's, its stylesheet rewritten, or an image.
pub(crate) async fn file(path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (content_type, body) = served(&path).ok_or(ApiError::NotFound("route"))?;
    Ok(immutable(content_type, body))
}

/// What `/docs/assets/{path}` serves: its content type and bytes.
fn served(path: &str) -> Option<(&'static str, &'static [u8])> {
    if let Some(name) = path.strip_prefix("images/") {
        let image = STYLESHEET.image(name)?;
        return Some((image.content_type, image.bytes.as_slice()));
    }
    match path.strip_prefix(VIEWER)?.strip_prefix('/')? {
        "swagger-ui-bundle.js" => Some((SCRIPT, VIEWER_SCRIPT)),
        name if name == *STYLESHEET_NAME => Some((STYLE, STYLESHEET.css.as_bytes())),
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
        let page = PAGE.as_str();
        assert!(!page.contains("{stylesheet}"));
        let mut loaded = 0;
        for attribute in ["src=\"", "href=\""] {
            for (at, _) in page.match_indices(attribute) {
                let url = page[at + attribute.len()..].split('"').next().unwrap();
                loaded += 1;
                let ok = match url {
                    "/docs/docs.js" | "/openapi.json" => true,
                    other => other
                        .strip_prefix("/docs/assets/")
                        .and_then(served)
                        .is_some(),
                };
                assert!(ok, "the page loads {url}, which payorch does not serve");
            }
        }
        assert_eq!(loaded, 4);
    }

    /// The viewer's stylesheet loads no font and nothing from another site, and the one
    /// served is the published one but for each `data:` URL, in its place a path of
    /// payorch's: the cascade, `@media (forced-colors: active)` rules and all, is as published.
    #[test]
    fn the_served_stylesheet_is_the_viewers_with_paths_for_its_images() {
        assert!(!VIEWER_STYLE.contains("@import") && !VIEWER_STYLE.contains("@font-face"));
        /// The text outside `url(…)` (none of whose URLs holds a `")` or, unquoted, a `)`),
        /// and the URLs.
        fn split(css: &str) -> (Vec<&str>, Vec<&str>) {
            let (mut outside, mut urls) = (Vec::new(), Vec::new());
            let mut rest = css;
            while let Some(at) = rest.find("url(") {
                outside.push(&rest[..at]);
                let url = &rest[at + 4..];
                let (url, len) = match url.strip_prefix('"') {
                    Some(quoted) => (&quoted[..quoted.find("\")").unwrap()], 3),
                    None => (&url[..url.find(')').unwrap()], 1),
                };
                urls.push(url);
                rest = &rest[at + 4 + url.len() + len..];
            }
            outside.push(rest);
            (outside, urls)
        }
        let (published, data_urls) = split(VIEWER_STYLE);
        let (rewritten, paths) = split(&STYLESHEET.css);
        assert!(
            data_urls.iter().all(|url| url.starts_with("data:")),
            "the viewer's stylesheet loads something other than a data: URL"
        );
        assert!(
            published == rewritten,
            "the served stylesheet differs outside url(…)"
        );
        assert_eq!(paths.len(), data_urls.len());
        assert!(data_urls.len() >= 20, "{}", data_urls.len());
        for path in paths {
            let name = path.strip_prefix(IMAGES).expect("a path of payorch's");
            let (content_type, bytes) = served(&format!("images/{name}")).unwrap();
            assert_eq!(content_type, STYLESHEET.image(name).unwrap().content_type);
            assert!(content_type != "image/svg+xml" || bytes.starts_with(b"<svg"));
        }
        assert!(!STYLESHEET.css.contains("data:"));
        assert!(
            served(&format!("{VIEWER}/{}", *STYLESHEET_NAME)).is_some()
                && served(&format!("{VIEWER}/swagger-ui.css")).is_none(),
            "only the rewritten stylesheet is served, under its content's name"
        );
    }
}

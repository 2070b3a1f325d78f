//! `/docs`, the API reference (docs/guides/api-reference.md): served whole by payorch, with
//! caching that fits each file, and rendered in headless Chromium (see [`crate::browser`])
//! with every operation of `/openapi.json` listed and nothing refused by the page's policy.
//! Screenshots are saved under `target/tmp/screenshots/`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::{json, Value};

use crate::browser::{browser, devtools, run, screenshot};
use crate::helpers::{eventually, TestApp};

/// What `/docs` loads, as the page names it.
fn loaded_by(page: &str) -> Vec<String> {
    ["src=\"", "href=\""]
        .iter()
        .flat_map(|attribute| {
            page.match_indices(attribute)
                .map(|(at, _)| page[at + attribute.len()..].split('"').next().unwrap())
        })
        .filter(|url| url.starts_with("/docs/"))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn the_api_reference_and_its_files_are_served_with_the_pages_policy_and_cached() {
    let app = TestApp::spawn().await;
    let console_policy = app.get("/console").await.headers()["content-security-policy"].clone();

    let page = app.get("/docs").await;
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["cache-control"], "no-cache");
    assert_eq!(
        headers["content-security-policy"], console_policy,
        "/docs has the console's policy, not a weaker one"
    );
    let page = page.text().await.unwrap();
    let loaded = loaded_by(&page);
    assert_eq!(loaded.len(), 3, "{loaded:?}");

    for url in &loaded {
        let answer = app
            .client
            .get(app.url(url))
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{url}");
        let headers = answer.headers().clone();
        let wanted = if url.ends_with(".js") {
            "text/javascript; charset=utf-8"
        } else {
            "text/css; charset=utf-8"
        };
        assert_eq!(headers["content-type"], wanted, "{url}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{url}");
        let body = answer.bytes().await.unwrap();
        if url.starts_with("/docs/assets/") {
            // Its path names the viewer's version, and the stylesheet's its content: a new
            // version, or a new rewriting of the stylesheet, is a new path.
            assert!(url.contains("/swagger-ui-dist-5.35.0/"), "{url}");
            assert_eq!(
                headers["cache-control"], "public, max-age=31536000, immutable",
                "{url}"
            );
            assert_eq!(headers["content-encoding"], "gzip", "{url}");
            assert_eq!(&body[..2], b"\x1f\x8b", "{url} is gzip");
        } else {
            assert_eq!(headers["cache-control"], "no-cache", "{url}");
        }
    }
    // Unzipped, for the size the gzip saves.
    let script = app
        .get("/docs/assets/swagger-ui-dist-5.35.0/swagger-ui-bundle.js")
        .await;
    assert!(script.headers().get("content-encoding").is_none());
    let plain = script.bytes().await.unwrap().len();
    let zipped = app
        .client
        .get(app.url("/docs/assets/swagger-ui-dist-5.35.0/swagger-ui-bundle.js"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len();
    assert!(zipped * 2 < plain, "gzip: {zipped} of {plain} bytes");

    // The stylesheet's images, served from payorch's paths under their content's name.
    let stylesheet = loaded.iter().find(|url| url.ends_with(".css")).unwrap();
    assert!(
        stylesheet.starts_with("/docs/assets/swagger-ui-dist-5.35.0/swagger-ui.")
            && stylesheet.len() == "/docs/assets/swagger-ui-dist-5.35.0/swagger-ui.".len() + 16 + 4,
        "{stylesheet} is named by its content"
    );
    let style = app.get(stylesheet).await.text().await.unwrap();
    assert!(!style.contains("data:"));
    let mut names = BTreeSet::new();
    for (at, _) in style.match_indices("url(\"") {
        names.insert(style[at + 5..].split('"').next().unwrap().to_string());
    }
    assert!(names.len() >= 4, "{style}");
    for url in &names {
        assert!(url.starts_with("/docs/assets/images/"), "{url}");
        let image = app.get(url).await;
        assert_eq!(image.status(), 200, "{url}");
        let wanted = if url.ends_with(".svg") {
            "image/svg+xml"
        } else {
            "image/"
        };
        let content_type = image.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(content_type.starts_with(wanted), "{url}: {content_type}");
        assert_eq!(
            image.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
    }

    for missing in [
        "/docs/assets/swagger-ui-dist-5.35.0/index.html",
        // The published stylesheet: only its rewritten copy is served.
        "/docs/assets/swagger-ui-dist-5.35.0/swagger-ui.css",
        "/docs/images.css",
        "/docs/assets/swagger-ui-dist-5.34.0/swagger-ui.css",
        "/docs/assets/images/0000000000000000.svg",
        "/docs/assets/",
    ] {
        let answer = app.get(missing).await;
        assert_eq!(answer.status(), 404, "{missing}");
    }
    let post = app.client.post(app.url("/docs")).send().await.unwrap();
    assert_eq!(post.status(), 405);
    assert_eq!(post.headers()["allow"], "GET");
}

/// Installed before any of the page's scripts runs: what the page's policy refuses, an
/// uncaught error, a file that fails to load and a `console.error` are written down.
const WATCH: &str = r#"
window.__problems = [];
const note = (what) => window.__problems.push(String(what));
document.addEventListener("securitypolicyviolation", (e) =>
  note(`the policy's ${e.violatedDirective} refused ${e.blockedURI} (${e.sourceFile}:${e.lineNumber})`));
window.addEventListener("error", (e) => note(e instanceof ErrorEvent
  ? `uncaught: ${e.message} (${e.filename}:${e.lineno})`
  : `failed to load ${e.target.src || e.target.href}`), true);
window.addEventListener("unhandledrejection", (e) => note(`unhandled rejection: ${e.reason}`));
const error = console.error;
console.error = (...args) => { note(`console.error: ${args.join(" ")}`); error.apply(console, args); };
"#;

/// (METHOD, path) of every operation on the page, with the summary it shows.
async fn listed(client: &Client) -> BTreeMap<(String, String), String> {
    let rows = run(
        client,
        "return [...document.querySelectorAll('.opblock')].map(b => [
           b.querySelector('.opblock-summary-method')?.textContent ?? '',
           b.querySelector('.opblock-summary-path')?.dataset.path ?? '',
           b.querySelector('.opblock-summary-description')?.textContent ?? ''])",
    )
    .await;
    let rows: Vec<(String, String, String)> = serde_json::from_value(rows).unwrap();
    rows.into_iter()
        .map(|(method, path, summary)| ((method.to_uppercase(), path), summary))
        .collect()
}

async fn problems(client: &Client) -> Vec<String> {
    serde_json::from_value(run(client, "return window.__problems").await).unwrap()
}

#[tokio::test]
async fn the_api_reference_lists_every_operation_under_the_pages_policy() {
    let Some((driver, client)) = browser().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let document: Value = app.get("/openapi.json").await.json().await.unwrap();
    // The paths' operations, and the webhooks payorch sends (OpenAPI 3.1), listed by name.
    let mut operations = BTreeMap::new();
    let paths = document["paths"].as_object().unwrap();
    let webhooks = document["webhooks"].as_object().unwrap();
    for (path, item) in paths.iter().chain(webhooks) {
        for (method, operation) in item.as_object().unwrap() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                let summary = operation["summary"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                operations.insert((method.to_uppercase(), path.clone()), summary);
            }
        }
    }
    assert!(operations.len() > 30 && !webhooks.is_empty());

    devtools(
        &driver,
        &client,
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": WATCH }),
    )
    .await;
    let started = std::time::Instant::now();
    client.goto(&app.url("/docs")).await.unwrap();
    let all_listed = eventually(Duration::from_secs(30), || async {
        listed(&client).await.len() >= operations.len()
    })
    .await;
    eprintln!(
        "/docs listed its operations {:?} after it was asked for",
        started.elapsed()
    );
    let shown = listed(&client).await;
    screenshot(&client, "api-reference-1-operations").await;
    let missing: Vec<_> = operations
        .keys()
        .filter(|op| !shown.contains_key(op))
        .collect();
    let extra: Vec<_> = shown
        .keys()
        .filter(|op| !operations.contains_key(op))
        .collect();
    assert!(
        all_listed && missing.is_empty() && extra.is_empty(),
        "/docs lists {} of the document's {} operations: not {missing:?}; and {extra:?}, \
         which /openapi.json does not have",
        shown.len(),
        operations.len()
    );
    for (operation, summary) in &operations {
        assert!(!summary.is_empty(), "{operation:?} has no summary");
        assert_eq!(&shown[operation], summary, "{operation:?}'s summary");
    }

    // An operation opened shows its description and an example answer, with the viewer's
    // copy button, whose icon is one of its stylesheet's images, served from payorch's paths.
    let checkout = client
        .find(Locator::Css(
            ".opblock-post .opblock-summary-path[data-path='/v1/checkout']",
        ))
        .await
        .unwrap();
    checkout.click().await.unwrap();
    let description = document["paths"]["/v1/checkout"]["post"]["description"]
        .as_str()
        .unwrap();
    let first_words: String = description
        .split_whitespace()
        .take(4)
        .collect::<Vec<_>>()
        .join(" ");
    let opened = eventually(Duration::from_secs(10), || async {
        run(
            &client,
            "const b = document.querySelector('.opblock-post.is-open');
             return b ? [b.querySelector('.opblock-description-wrapper')?.textContent ?? '',
                         b.querySelectorAll('.copy-to-clipboard').length] : null",
        )
        .await
        .as_array()
        .is_some_and(|shown| {
            shown[0].as_str().unwrap_or("").contains(&first_words) && shown[1].as_u64() > Some(0)
        })
    })
    .await;
    assert!(
        opened,
        "POST /v1/checkout opened shows no description ({first_words:?}) or example"
    );
    run(
        &client,
        "document.querySelector('.opblock-post.is-open').scrollIntoView()",
    )
    .await;
    screenshot(&client, "api-reference-2-checkout-opened").await;

    // In forced colours (Windows' high contrast), the viewer's own `@media (forced-colors:
    // active)` rules draw the copy button in the system's colours with no background image:
    // payorch's paths in place of its `data:` URLs must leave that cascade as published.
    let copy_button =
        "const b = document.querySelector('.opblock-post.is-open .copy-to-clipboard button');
         const s = getComputedStyle(b);
         return [s.backgroundImage, s.maskImage || s.webkitMaskImage, s.backgroundColor]";
    let plain = run(&client, copy_button).await;
    assert!(
        plain[0].as_str().unwrap().contains("/docs/assets/images/"),
        "the copy button's icon comes from payorch's path: {plain}"
    );
    let forced =
        json!({ "media": "", "features": [{ "name": "forced-colors", "value": "active" }] });
    devtools(&driver, &client, "Emulation.setEmulatedMedia", forced).await;
    let high_contrast = run(&client, copy_button).await;
    screenshot(&client, "api-reference-2-checkout-forced-colors").await;
    devtools(
        &driver,
        &client,
        "Emulation.setEmulatedMedia",
        json!({ "features": [] }),
    )
    .await;
    assert!(
        high_contrast[0] == "none"
            && high_contrast[2] != "rgba(0, 0, 0, 0)"
            && high_contrast[1]
                .as_str()
                .unwrap()
                .contains("/docs/assets/images/"),
        "in forced colours the copy button is the viewer's mask in the system's colour, \
         with no background image: {high_contrast}"
    );

    // The schemas at the foot of the page, one of them opened.
    run(
        &client,
        "document.querySelector('section.models').scrollIntoView()",
    )
    .await;
    client
        .find(Locator::Css(
            "section.models .json-schema-2020-12-accordion",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    screenshot(&client, "api-reference-3-schemas").await;

    // "Try it out" sends the request to the payorch that served the page, as the policy's
    // `connect-src 'self'` allows, and shows its answer.
    let live = ".opblock-get:has(.opblock-summary-path[data-path='/health/live'])";
    client
        .find(Locator::Css(&format!("{live} .opblock-summary-control")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    for button in [".try-out__btn", ".execute"] {
        let found = eventually(Duration::from_secs(10), || async {
            client
                .find(Locator::Css(&format!("{live} {button}")))
                .await
                .is_ok()
        })
        .await;
        assert!(found, "no {button} on GET /health/live");
        client
            .find(Locator::Css(&format!("{live} {button}")))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }
    let answered = eventually(Duration::from_secs(10), || async {
        run(
            &client,
            &format!(
                "return [...document.querySelectorAll(\"{live} .live-responses-table \
                 .response-col_status\")].some(cell => cell.textContent.trim() === '200')"
            ),
        )
        .await
            == json!(true)
    })
    .await;
    run(
        &client,
        &format!("document.querySelector(\"{live} .live-responses-table\").scrollIntoView()"),
    )
    .await;
    screenshot(&client, "api-reference-4-tried").await;
    assert!(answered, "Try it out on GET /health/live shows no 200");

    let problems = problems(&client).await;
    assert!(problems.is_empty(), "/docs: {problems:#?}");
    let fetched: Vec<String> = serde_json::from_value(
        run(
            &client,
            "return performance.getEntriesByType('resource').map(r => r.name)",
        )
        .await,
    )
    .unwrap();
    assert!(
        fetched
            .iter()
            .any(|url| url.contains("/docs/assets/images/")),
        "the viewer's icons come from payorch's paths: {fetched:?}"
    );
    assert!(
        fetched.iter().all(|url| url.starts_with(&app.base_url)),
        "the page asked another site: {fetched:?}"
    );
    client.close().await.unwrap();
}

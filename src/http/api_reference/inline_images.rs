//! Swagger UI's stylesheet draws its icons (a select's arrow, the copy button, a model's
//! toggle) as `data:` URLs, which the pages' policy refuses (`img-src 'self'`, see
//! [`crate::http::assets`]). Rather than allow `data:` for `/docs`, payorch serves each of
//! those images from a path of its own and the stylesheet with each `data:` URL replaced,
//! where it stands, by that path. Nothing else of the file changes, so its cascade is the
//! published one. That matters: its `@media (forced-colors: active)` rules come after the
//! rules that set an icon and take it away again (`background-image: none`, the icon drawn as
//! a mask in the system's colour instead); declarations repeated in a stylesheet loaded after
//! it would override them, and high-contrast mode would lose the icons.
//!
//! The rewriting reads only what it needs of CSS (comments, strings, `url(…)`), and is
//! total: whatever it cannot read, or a `data:` URL of a type it does not serve, it leaves
//! as it is. Derived from the published stylesheet once, it follows the viewer through an
//! upgrade.

use base64::Engine;
use sha2::{Digest, Sha256};

/// A stylesheet whose `data:` images are served from paths.
pub(crate) struct Rewritten {
    /// The stylesheet, each `data:` URL it could read replaced by its image's path.
    pub css: String,
    pub images: Vec<Image>,
}

/// One image that was a `data:` URL, named by its content so that its path never changes
/// meaning (it is cached as immutable).
pub(crate) struct Image {
    pub name: String,
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

impl Rewritten {
    pub(crate) fn image(&self, name: &str) -> Option<&Image> {
        self.images.iter().find(|image| image.name == name)
    }

    /// The name of the image `bytes`, kept once however often it is used.
    fn keep(&mut self, content_type: &'static str, bytes: Vec<u8>) -> String {
        let name = format!("{}.{}", short_hash(&bytes), extension(content_type));
        if self.image(&name).is_none() {
            self.images.push(Image {
                name: name.clone(),
                content_type,
                bytes,
            });
        }
        name
    }
}

/// 16 hexadecimal digits of `bytes`' SHA-256: a name that changes when they do.
pub(crate) fn short_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn extension(content_type: &str) -> &str {
    content_type
        .strip_prefix("image/")
        .map_or("bin", |kind| kind.split('+').next().unwrap_or(kind))
}

/// `css` with every `data:` image URL outside comments and strings replaced by
/// `url("` + `prefix` + the image's name + `")`, and the images.
pub(crate) fn rewrite(css: &str, prefix: &str) -> Rewritten {
    let mut rewritten = Rewritten {
        css: String::with_capacity(css.len()),
        images: Vec::new(),
    };
    let bytes = css.as_bytes();
    // What is copied as it is runs from `copied` to `i`. Every index a slice is taken at is
    // that of an ASCII byte (`/`, `u`, just past `)`) or the end: a character's boundary.
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = css[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |end| i + 2 + end + 2);
            }
            b'"' | b'\'' => i = (string_end(bytes, i) + 1).min(bytes.len()),
            b'u' | b'U' if is_url_function(css, i) => {
                let image = url_at(&css[i..]).and_then(|(url, len)| {
                    let data = url
                        .get(..5)
                        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("data:"));
                    let (content_type, image) = decode(url.get(5..).filter(|_| data)?)?;
                    Some((content_type, image, len))
                });
                match image {
                    Some((content_type, image, len)) => {
                        rewritten.css.push_str(&css[copied..i]);
                        let name = rewritten.keep(content_type, image);
                        rewritten.css.push_str(&format!("url(\"{prefix}{name}\")"));
                        i += len;
                        copied = i;
                    }
                    // Left as it is; a string in it is skipped like any other.
                    None => i += 4,
                }
            }
            _ => i += 1,
        }
    }
    rewritten.css.push_str(&css[copied..]);
    rewritten
}

/// Whether `css` has the function `url(` at `at`, not the end of a longer name.
fn is_url_function(css: &str, at: usize) -> bool {
    let named = css
        .get(at..at + 4)
        .is_some_and(|name| name.eq_ignore_ascii_case("url("));
    let before = at
        .checked_sub(1)
        .and_then(|b| css.as_bytes().get(b))
        .copied();
    named
        && !before.is_some_and(|b| {
            b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'\\' || !b.is_ascii()
        })
}

/// The index of the quote that closes the string whose quote is at `open`, or the end.
fn string_end(bytes: &[u8], open: usize) -> usize {
    let quote = bytes[open];
    let mut i = open + 1;
    while i < bytes.len() && bytes[i] != quote {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    i.min(bytes.len())
}

/// The URL of the `url(…)` that `text` starts with, unescaped, and the length of the whole;
/// `None` if it is not one that can be read (unclosed, or with more than a URL in it).
fn url_at(text: &str) -> Option<(String, usize)> {
    let inner = text.get(4..)?;
    let skipped = inner.len() - inner.trim_start().len();
    let inner = inner.trim_start();
    let (url, used) = match inner.as_bytes().first() {
        Some(b'"' | b'\'') => {
            let end = string_end(inner.as_bytes(), 0);
            let string = inner.get(1..end)?;
            // An unescaped line break ends a string badly.
            if string.contains(['\n', '\r', '\x0c']) {
                return None;
            }
            (unescape(string), end + 1)
        }
        _ => {
            let end = inner.find(')')?;
            let url = inner[..end].trim();
            if url.contains(['"', '\'', '(', ' ', '\t', '\n', '\r', '\x0c', '\\']) {
                return None;
            }
            (url.to_string(), end)
        }
    };
    let after = inner.get(used..)?;
    let close = after.find(')')?;
    after[..close].trim().is_empty().then_some(())?;
    Some((url, 4 + skipped + used + close + 1))
}

/// A CSS string's text: `\"` is `"`, `\22` is `"`, an escaped line break is nothing.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let mut hex = String::new();
        while hex.len() < 6 && chars.peek().is_some_and(char::is_ascii_hexdigit) {
            hex.push(chars.next().unwrap());
        }
        if hex.is_empty() {
            match chars.next() {
                Some('\n') | None => {}
                Some(other) => out.push(other),
            }
        } else {
            if chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                chars.next();
            }
            let code = u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD);
            out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
        }
    }
    out
}

/// A `data:` URL's content type and bytes (RFC 2397), for the image types a stylesheet uses.
fn decode(data: &str) -> Option<(&'static str, Vec<u8>)> {
    let (meta, payload) = data.split_once(',')?;
    let mut params = meta.split(';');
    let content_type = match params.next()?.trim().to_ascii_lowercase().as_str() {
        "image/svg+xml" => "image/svg+xml",
        "image/png" => "image/png",
        "image/jpeg" => "image/jpeg",
        "image/gif" => "image/gif",
        "image/webp" => "image/webp",
        _ => return None,
    };
    let bytes = if params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        base64::engine::general_purpose::STANDARD
            .decode(payload.trim())
            .ok()?
    } else {
        percent_decode(payload)
    };
    Some((content_type, bytes))
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_url_is_replaced_where_it_stands_and_nothing_else_changes() {
        let css = r#"a{color:red}@supports (mask-image:none){.b select,.c{mask-image:url("data:image/svg+xml;charset=utf-8,<svg xmlns=\"x\"><path fill=\"%23fff\"/></svg>");color:blue}}.d{background:#fff url(data:image/png;base64,iVBORw0KGgo=) repeat}.e{background:url(/x.png)}@media (forced-colors:active){.d{background-image:none;mask-image:URL( 'data:image/png;base64,iVBORw0KGgo=' )}}"#;
        let rewritten = rewrite(css, "/img/");
        assert_eq!(rewritten.images.len(), 2);
        let svg = &rewritten.images[0];
        assert_eq!(svg.content_type, "image/svg+xml");
        assert_eq!(svg.bytes, br##"<svg xmlns="x"><path fill="#fff"/></svg>"##);
        assert!(svg.name.ends_with(".svg"), "{}", svg.name);
        let png = &rewritten.images[1];
        assert_eq!(png.bytes, b"\x89PNG\r\n\x1a\n");
        assert!(png.name.ends_with(".png"), "{}", png.name);
        // The rule that takes the image away still comes after the one that sets it.
        assert_eq!(
            rewritten.css,
            format!(
                "a{{color:red}}@supports (mask-image:none){{.b select,.c{{mask-image:url(\"/img/{svg}\");color:blue}}}}\
                 .d{{background:#fff url(\"/img/{png}\") repeat}}.e{{background:url(/x.png)}}\
                 @media (forced-colors:active){{.d{{background-image:none;mask-image:url(\"/img/{png}\")}}}}",
                svg = svg.name,
                png = png.name
            )
        );
    }

    #[test]
    fn an_image_used_twice_is_kept_once() {
        let rewritten = rewrite(
            ".a{background:url('data:image/gif;base64,R0lG')}.b{list-style:url('data:image/gif;base64,R0lG')}",
            "/",
        );
        assert_eq!(rewritten.images.len(), 1);
        assert_eq!(rewritten.css.matches(&rewritten.images[0].name).count(), 2);
    }

    /// What is not a readable `data:` image URL in a rule is left as it is, and nothing
    /// makes the rewriting panic.
    #[test]
    fn what_cannot_be_read_is_left_as_it_is() {
        for css in [
            // Unclosed strings and functions.
            r#"a{b:url("data:x)"#,
            "a{b:url('abc",
            r#"a{b:url("data:image/gif;base64,R0lG"#,
            "a{b:url(data:image/gif;base64,R0lG",
            "url(",
            "url( ",
            "url(\"",
            "url('\\",
            "url(\"\\é",
            "a{b:\"\\",
            "/* url(data:image/gif;base64,R0lG)",
            // More than a URL in it, or a line break in its string.
            r#"a{b:url("data:image/gif;base64,R0lG" x)}"#,
            "a{b:url(\"data:image/gif;\nbase64,R0lG\")}",
            "a{b:url(data:image/gif;base64,R0lG x)}",
            "a{b:url(data:image/gif;base64,\"R0lG\")}",
            // Not an image payorch serves, or not decodable.
            "a{b:url(data:text/html,<b>hi</b>)}",
            "a{b:url(data:image/gif;base64,!!!)}",
            "a{b:url(data:image/gif)}",
            "a{b:url(/x.png)}",
            // Not the function `url(`, or in a comment or a string.
            "a{b:xurl(data:image/gif;base64,R0lG)}",
            "a{b:éurl(data:image/gif;base64,R0lG)}",
            "/* url(data:image/gif;base64,R0lG) */a{}",
            "a{content:\"url(data:image/gif;base64,R0lG)\"}",
            "a{content:'\\'url(data:image/gif;base64,R0lG)'}",
            "",
            "é",
            "url(é)",
            "url(\"é",
        ] {
            let rewritten = rewrite(css, "/img/");
            assert_eq!(rewritten.css, css);
            assert!(rewritten.images.is_empty(), "{css}");
        }
    }

    /// Every way of cutting a stylesheet short, at every character, is rewritten without a
    /// panic, and each `data:` URL it replaces is whole.
    #[test]
    fn a_stylesheet_cut_anywhere_is_rewritten_without_a_panic() {
        let css = r#"/*x*/a{b:url( "data:image/svg+xml;charset=utf-8,<svg>\"é\"</svg>" )}c{d:url(data:image/gif;base64,R0lG);e:"f\"url(" }g{h:url('data:image/png;base64,iVBORw0KGgo=')}"#;
        let whole = rewrite(css, "/img/");
        assert_eq!(whole.images.len(), 3);
        for (at, _) in css.char_indices().chain([(css.len(), ' ')]) {
            let cut = rewrite(&css[..at], "/img/");
            assert!(cut.images.len() <= 3);
            for image in &cut.images {
                let same = whole.image(&image.name).expect("an image of the whole");
                assert_eq!(same.bytes, image.bytes);
            }
        }
    }
}

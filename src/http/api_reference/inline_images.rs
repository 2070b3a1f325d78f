//! Swagger UI's stylesheet draws its icons (a select's arrow, the copy button, a model's
//! toggle) as `data:` URLs, which the pages' policy refuses (`img-src 'self'`, see
//! [`crate::http::assets`]). Rather than allow `data:` for `/docs` or edit the published file,
//! payorch serves each of those images from a path of its own, and a stylesheet loaded after
//! Swagger UI's repeats each declaration that holds one, with the path in place of the `data:`
//! URL, under the same selector and the same at-rules. Coming later with the same
//! specificity, it wins, so the browser never loads the `data:` URL. Derived from the
//! published stylesheet when first asked for, it follows the viewer through an upgrade.

use base64::Engine;
use sha2::{Digest, Sha256};

/// What is derived from one stylesheet.
pub(crate) struct InlineImages {
    /// The declarations that held a `data:` URL, now pointing at [`Self::images`].
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

impl InlineImages {
    pub(crate) fn image(&self, name: &str) -> Option<&Image> {
        self.images.iter().find(|image| image.name == name)
    }
}

/// Lifts every `data:` URL out of `css`'s style rules; each image is then served at
/// `prefix` + its name.
pub(crate) fn lift(css: &str, prefix: &str) -> InlineImages {
    let mut lifted = InlineImages {
        css: String::new(),
        images: Vec::new(),
    };
    // The preludes of the blocks we are in (at-rules, then a selector), outermost first.
    let mut blocks: Vec<&str> = Vec::new();
    let mut start = 0;
    let bytes = css.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = css[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |end| i + 2 + end + 2);
                continue;
            }
            b'"' | b'\'' => i = string_end(bytes, i),
            // An unquoted URL may hold `;` (`data:image/png;base64,…`).
            b'u' if css[i..].starts_with("url(") => {
                let len = url_at(&css[i..]).map(|(_, len)| len);
                i = len
                    .or_else(|| css[i..].find(')').map(|end| end + 1))
                    .map_or(bytes.len(), |len| i + len - 1);
            }
            b'{' => {
                blocks.push(css[start..i].trim());
                start = i + 1;
            }
            b';' | b'}' => {
                let in_style_rule = blocks.last().is_some_and(|b| !b.starts_with('@'));
                if in_style_rule {
                    lifted.declaration(&blocks, &css[start..i], prefix);
                }
                if bytes[i] == b'}' {
                    blocks.pop();
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    lifted
}

impl InlineImages {
    /// Repeats `declaration` of the innermost of `blocks` if it holds a `data:` URL.
    fn declaration(&mut self, blocks: &[&str], declaration: &str, prefix: &str) {
        let mut rest = declaration;
        let mut rewritten = String::new();
        let mut lifted_any = false;
        while let Some(at) = rest.find("url(") {
            let (before, from) = rest.split_at(at);
            rewritten.push_str(before);
            let Some((url, len)) = url_at(from) else {
                rewritten.push_str(from);
                rest = "";
                break;
            };
            match url.strip_prefix("data:").and_then(decode) {
                Some((content_type, bytes)) => {
                    let name = self.keep(content_type, bytes);
                    rewritten.push_str(&format!("url(\"{prefix}{name}\")"));
                    lifted_any = true;
                }
                None => rewritten.push_str(&from[..len]),
            }
            rest = &from[len..];
        }
        rewritten.push_str(rest);
        if !lifted_any {
            return;
        }
        for prelude in blocks {
            self.css.push_str(prelude);
            self.css.push('{');
        }
        self.css.push_str(rewritten.trim());
        self.css.push_str(&"}".repeat(blocks.len()));
        self.css.push('\n');
    }

    /// The name of the image `bytes`, kept once however often it is used.
    fn keep(&mut self, content_type: &'static str, bytes: Vec<u8>) -> String {
        let digest = Sha256::digest(&bytes);
        let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let extension = content_type
            .strip_prefix("image/")
            .map_or("bin", |kind| kind.split('+').next().unwrap_or(kind));
        let name = format!("{hash}.{extension}");
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

/// The index just past the string whose quote is at `open`.
fn string_end(bytes: &[u8], open: usize) -> usize {
    let quote = bytes[open];
    let mut i = open + 1;
    while i < bytes.len() && bytes[i] != quote {
        i += if bytes[i] == b'\\' { 2 } else { 1 };
    }
    i
}

/// The URL of the `url(…)` that `text` starts with, unescaped, and the length of the whole.
fn url_at(text: &str) -> Option<(String, usize)> {
    let inner = &text[4..];
    let skipped = inner.len() - inner.trim_start().len();
    let inner = inner.trim_start();
    let (url, used) = match inner.as_bytes().first() {
        Some(b'"' | b'\'') => {
            let end = string_end(inner.as_bytes(), 0);
            (unescape(inner.get(1..end)?), end + 1)
        }
        _ => {
            let end = inner.find(')')?;
            (inner[..end].trim().to_string(), end)
        }
    };
    let after = &inner[used..];
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
    fn a_data_url_moves_to_a_path_under_its_rule_and_at_rules() {
        let css = r#"a{color:red}@supports (mask-image:none){.b select,.c{mask-image:url("data:image/svg+xml;charset=utf-8,<svg xmlns=\"x\"><path fill=\"%23fff\"/></svg>");color:blue}}.d{background:#fff url(data:image/png;base64,iVBORw0KGgo=) repeat}.e{background:url(/x.png)}"#;
        let lifted = lift(css, "/img/");
        assert_eq!(lifted.images.len(), 2);
        let svg = &lifted.images[0];
        assert_eq!(svg.content_type, "image/svg+xml");
        assert_eq!(svg.bytes, br##"<svg xmlns="x"><path fill="#fff"/></svg>"##);
        assert!(svg.name.ends_with(".svg"), "{}", svg.name);
        let png = &lifted.images[1];
        assert_eq!(png.bytes, b"\x89PNG\r\n\x1a\n");
        assert_eq!(
            lifted.css,
            format!(
                "@supports (mask-image:none){{.b select,.c{{mask-image:url(\"/img/{}\")}}}}\n\
                 .d{{background:#fff url(\"/img/{}\") repeat}}\n",
                svg.name, png.name
            )
        );
    }

    #[test]
    fn an_image_used_twice_is_kept_once() {
        let lifted = lift(
            ".a{background:url('data:image/gif;base64,R0lG')}.b{list-style:url('data:image/gif;base64,R0lG')}",
            "/",
        );
        assert_eq!(lifted.images.len(), 1);
        assert_eq!(lifted.css.matches(&lifted.images[0].name).count(), 2);
    }
}

//! The `Idempotency-Key` header: 1–255 visible ASCII characters, sent bare (`abc`) or as an
//! RFC 8941 string (`"abc"`, as the IETF draft writes it); both forms name the same key.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the Idempotency-Key header is required on this request")]
    Missing,
    #[error(
        "the Idempotency-Key must be 1–255 visible ASCII characters, bare or as a quoted string"
    )]
    Invalid,
}

pub const MAX_KEY_LEN: usize = 255;

impl IdempotencyKey {
    /// Parses the header's raw bytes (`None` when the header is absent).
    pub fn parse(header: Option<&[u8]>) -> Result<Self, KeyError> {
        let raw = header.ok_or(KeyError::Missing)?;
        let text = std::str::from_utf8(raw).map_err(|_| KeyError::Invalid)?;
        let text = text.trim_matches(|c| c == ' ' || c == '\t');
        let key = match text.strip_prefix('"') {
            Some(quoted) => unquote(quoted)?,
            None => text.to_string(),
        };
        let visible = |c: char| c.is_ascii_graphic();
        if key.is_empty() || key.len() > MAX_KEY_LEN || !key.chars().all(visible) {
            return Err(KeyError::Invalid);
        }
        Ok(IdempotencyKey(key))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The rest of an RFC 8941 sf-string after its opening quote: `\"` and `\\` are the only
/// escapes, and the closing quote must end the value.
fn unquote(rest: &str) -> Result<String, KeyError> {
    let mut out = String::with_capacity(rest.len());
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('"' | '\\')) => out.push(escaped),
                _ => return Err(KeyError::Invalid),
            },
            '"' => {
                return if chars.next().is_none() {
                    Ok(out)
                } else {
                    Err(KeyError::Invalid)
                };
            }
            c if (' '..='~').contains(&c) => out.push(c),
            _ => return Err(KeyError::Invalid),
        }
    }
    Err(KeyError::Invalid)
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<IdempotencyKey, KeyError> {
        IdempotencyKey::parse(Some(s.as_bytes()))
    }

    #[test]
    fn bare_and_quoted_forms_name_the_same_key() {
        assert_eq!(parse("order-42").unwrap(), parse("\"order-42\"").unwrap());
        assert_eq!(parse(r#""a\"b\\c""#).unwrap().as_str(), r#"a"b\c"#);
    }

    #[test]
    fn missing_empty_long_and_invisible_keys_are_refused() {
        assert_eq!(IdempotencyKey::parse(None), Err(KeyError::Missing));
        assert_eq!(parse(""), Err(KeyError::Invalid));
        assert_eq!(parse("\"\""), Err(KeyError::Invalid));
        assert_eq!(parse(&"k".repeat(256)), Err(KeyError::Invalid));
        assert!(parse(&"k".repeat(255)).is_ok());
        assert_eq!(parse("has space"), Err(KeyError::Invalid));
        assert_eq!(parse("\"has space\""), Err(KeyError::Invalid));
        assert_eq!(parse("é"), Err(KeyError::Invalid));
        assert_eq!(parse("\"unterminated"), Err(KeyError::Invalid));
        assert_eq!(parse("\"bad\\escape\""), Err(KeyError::Invalid));
        assert_eq!(parse("\"trailing\"x"), Err(KeyError::Invalid));
    }
}

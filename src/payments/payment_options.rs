//! How a payment is to be taken, besides with what: captured at once or held for a later
//! capture (`capture_method`), and where the payer comes back to after a 3-D Secure
//! challenge (`return_url`) (docs/guides/captures.md, "Authorize now, capture later", "3-D Secure").

use reqwest::Url;

use crate::providers::CaptureMethod;

/// The longest `return_url` taken: browsers and providers handle far longer ones, but a
/// merchant's return page needs no more.
pub const MAX_RETURN_URL_LEN: usize = 2048;

/// A payment's options, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentOptions {
    pub capture_method: CaptureMethod,
    pub return_url: Option<String>,
}

impl PaymentOptions {
    /// Reads the two optional fields; each problem as `(field, message)`.
    pub fn parse(
        capture_method: Option<&str>,
        return_url: Option<&str>,
    ) -> Result<Self, Vec<(String, String)>> {
        let mut problems = Vec::new();
        let capture_method = match capture_method {
            None | Some("automatic") => CaptureMethod::Automatic,
            Some("manual") => CaptureMethod::Manual,
            Some(_) => {
                problems.push((
                    "/capture_method".to_owned(),
                    "must be `automatic` (the default) or `manual`".to_owned(),
                ));
                CaptureMethod::Automatic
            }
        };
        let return_url = return_url.and_then(|raw| match parse_return_url(raw) {
            Ok(url) => Some(url),
            Err(message) => {
                problems.push(("/return_url".to_owned(), message));
                None
            }
        });
        if problems.is_empty() {
            Ok(PaymentOptions {
                capture_method,
                return_url,
            })
        } else {
            Err(problems)
        }
    }
}

/// An absolute `https` or `http` URL with a host: where a browser is sent, never a request
/// payorch makes itself, so any host the payer's browser can reach will do.
fn parse_return_url(raw: &str) -> Result<String, String> {
    let problem =
        || format!("must be an absolute http(s) URL of at most {MAX_RETURN_URL_LEN} characters");
    if raw.len() > MAX_RETURN_URL_LEN {
        return Err(problem());
    }
    let url = Url::parse(raw).map_err(|_| problem())?;
    if !matches!(url.scheme(), "https" | "http") || url.host_str().is_none() {
        return Err(problem());
    }
    Ok(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_is_automatic_unless_asked_for_manual() {
        let none = PaymentOptions::parse(None, None).unwrap();
        assert_eq!(none.capture_method, CaptureMethod::Automatic);
        let manual = PaymentOptions::parse(Some("manual"), None).unwrap();
        assert_eq!(manual.capture_method, CaptureMethod::Manual);
        let problems = PaymentOptions::parse(Some("later"), None).unwrap_err();
        assert_eq!(problems[0].0, "/capture_method");
    }

    #[test]
    fn return_urls_are_absolute_http_urls() {
        let ok = PaymentOptions::parse(None, Some("https://shop.example/return?x=1")).unwrap();
        assert_eq!(
            ok.return_url.as_deref(),
            Some("https://shop.example/return?x=1")
        );
        for bad in [
            "/return",
            "javascript:alert(1)",
            "ftp://shop.example/",
            "https://",
        ] {
            let problems = PaymentOptions::parse(None, Some(bad)).unwrap_err();
            assert_eq!(problems[0].0, "/return_url", "{bad}");
        }
        let long = format!("https://shop.example/{}", "a".repeat(MAX_RETURN_URL_LEN));
        assert!(PaymentOptions::parse(None, Some(&long)).is_err());
    }

    #[test]
    fn every_problem_is_told_at_once() {
        let problems = PaymentOptions::parse(Some("x"), Some("y")).unwrap_err();
        assert_eq!(problems.len(), 2);
    }
}

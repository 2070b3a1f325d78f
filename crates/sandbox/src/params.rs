//! Parsing of what clients send: the create form and the search query language.

use std::collections::BTreeMap;

use super::currency::is_iso4217;

/// A refused parameter: Stripe's `invalid_request_error` with its `code` and `param`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ParamError {
    pub code: &'static str,
    pub param: Option<String>,
    pub message: String,
}

impl ParamError {
    pub(super) fn new(code: &'static str, param: &str, message: String) -> Self {
        Self {
            code,
            param: Some(param.to_owned()),
            message,
        }
    }
}

/// `POST /v1/payment_intents` form parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CreateParams {
    pub amount: i64,
    pub currency: String,
    pub payment_method: Option<String>,
    pub confirm: bool,
    pub description: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// `manual`: a successful card is only authorised (`requires_capture`), held until it
    /// is captured or canceled. `automatic` (the default) and `automatic_async` capture it.
    pub capture_method: String,
    /// Where a 3-D Secure challenge sends the customer back (Stripe's `return_url`, Adyen's
    /// `returnUrl`).
    pub return_url: Option<String>,
    /// Whether the charge asks for 3-D Secure (Stripe's
    /// `payment_method_options[card][request_three_d_secure]=any`, Adyen's
    /// `authenticationData.attemptAuthentication: "always"`): what it then meets is
    /// `three_d_secure`'s.
    pub three_d_secure: bool,
    /// `scheme://host` the request reached the sandbox at: the challenge page is served
    /// there. Not a parameter: the route sets it from the request.
    pub site: String,
    /// Every parameter, sorted: what "the same parameters" means for idempotency.
    pub fingerprint: String,
}

/// Stripe's three capture methods.
const CAPTURE_METHODS: [&str; 3] = ["automatic", "automatic_async", "manual"];

/// The one payment method option the sandbox takes, and its values at the pinned API version
/// (2023-08-16): `any` asks for 3-D Secure, `automatic` (the default) leaves it to Stripe.
pub(super) const REQUEST_THREE_D_SECURE: &str =
    "payment_method_options[card][request_three_d_secure]";

/// Whether `value` of [`REQUEST_THREE_D_SECURE`] asks for 3-D Secure; a value the pinned
/// version does not have is refused.
pub(super) fn requests_three_d_secure(value: &str) -> Result<bool, ParamError> {
    match value {
        "any" => Ok(true),
        "automatic" => Ok(false),
        _ => Err(ParamError::new(
            "parameter_invalid_string",
            REQUEST_THREE_D_SECURE,
            format!("Invalid request_three_d_secure: must be one of any, automatic (not {value})"),
        )),
    }
}

impl CreateParams {
    /// Whether a successful card is only authorised, to be captured later.
    pub(super) fn is_manual_capture(&self) -> bool {
        self.capture_method == "manual"
    }
}

/// `scheme://host` the request reached the sandbox at (`CreateParams::site`).
pub(super) fn site(req: &actix_web::HttpRequest) -> String {
    let info = req.connection_info();
    format!("{}://{}", info.scheme(), info.host())
}

/// The refusal of a 3-D Secure card confirmed without a `return_url`: the challenge is a
/// full-page redirect, and the customer must have somewhere to come back to.
pub(super) fn missing_return_url() -> ParamError {
    ParamError::new(
        "parameter_missing",
        "return_url",
        "A return_url must be specified because this PaymentIntent's payment method \
         requires a redirect to authenticate the payment (3D Secure)."
            .to_owned(),
    )
}

/// A `return_url`: an absolute http(s) URL, as Stripe requires.
pub(super) fn parse_return_url(param: &str, value: &str) -> Result<String, ParamError> {
    match reqwest::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(value.to_owned()),
        _ => Err(ParamError::new(
            "url_invalid",
            param,
            format!("Not a valid URL: {value}"),
        )),
    }
}

impl CreateParams {
    pub(super) fn parse(body: &[u8]) -> Result<Self, ParamError> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(body).map_err(|e| ParamError {
                code: "parameter_invalid",
                param: None,
                message: format!("Invalid form body: {e}"),
            })?;
        let mut amount = None;
        let mut currency = None;
        let mut payment_method = None;
        let mut confirm = false;
        let mut description = None;
        let mut capture_method = "automatic".to_owned();
        let mut return_url = None;
        let mut three_d_secure = false;
        let mut metadata = BTreeMap::new();
        // Since API version 2023-08-16 an intent without `payment_method_types` takes
        // automatic payment methods, which may redirect: Stripe then wants a `return_url` on
        // a confirm unless redirects are off or the customer is off session (Stripe's
        // changelog, "Enables automatic payment methods by default").
        let mut may_redirect = true;
        for (name, value) in &pairs {
            match name.as_str() {
                name if name.starts_with("payment_method_types[") => {
                    if value != "card" {
                        return Err(ParamError::new(
                            "parameter_invalid_string",
                            name,
                            format!("The sandbox takes only card payments, not {value}."),
                        ));
                    }
                    may_redirect = false;
                }
                "automatic_payment_methods[allow_redirects]" if value == "never" => {
                    may_redirect = false;
                }
                "off_session" if matches!(value.as_str(), "true" | "True") => {
                    may_redirect = false;
                }
                "automatic_payment_methods[enabled]"
                | "automatic_payment_methods[allow_redirects]"
                | "off_session" => {}
                "capture_method" if CAPTURE_METHODS.contains(&value.as_str()) => {
                    capture_method = value.clone();
                }
                "capture_method" => {
                    return Err(ParamError::new(
                        "parameter_invalid_string",
                        "capture_method",
                        format!(
                            "Invalid capture_method: must be one of {}",
                            CAPTURE_METHODS.join(", ")
                        ),
                    ))
                }
                "return_url" => return_url = Some(parse_return_url("return_url", value)?),
                REQUEST_THREE_D_SECURE => three_d_secure = requests_three_d_secure(value)?,
                "amount" => {
                    let parsed = value.parse::<i64>().ok().filter(|a| *a >= 1);
                    amount = Some(parsed.ok_or_else(|| {
                        ParamError::new(
                            "parameter_invalid_integer",
                            "amount",
                            format!("Invalid positive integer: {value}"),
                        )
                    })?);
                }
                "currency" => {
                    // "Three-letter ISO currency code" (Stripe's document): an unknown one is
                    // refused, as Stripe refuses it.
                    if !is_iso4217(value) {
                        return Err(ParamError::new(
                            "parameter_invalid_string",
                            "currency",
                            format!("Invalid currency: {value}"),
                        ));
                    }
                    currency = Some(value.to_ascii_lowercase());
                }
                "payment_method" => payment_method = Some(value.clone()),
                "confirm" => {
                    // Stripe's v1 API takes Python's spelling too, which stripe-python
                    // before 12.0.1 sends for `confirm=True`.
                    confirm = match value.as_str() {
                        "true" | "True" => true,
                        "false" | "False" => false,
                        _ => {
                            return Err(ParamError::new(
                                "parameter_invalid_boolean",
                                "confirm",
                                format!("Invalid boolean: {value}"),
                            ))
                        }
                    }
                }
                "description" => description = Some(value.clone()),
                _ => match metadata_key(name) {
                    Some(key) if key.is_empty() || key.chars().count() > 40 => {
                        return Err(ParamError::new(
                            "parameter_invalid_string",
                            name,
                            "Metadata keys must be 1 to 40 characters.".to_owned(),
                        ))
                    }
                    Some(_) if value.chars().count() > 500 => {
                        return Err(ParamError::new(
                            "parameter_invalid_string",
                            name,
                            "Metadata values can have up to 500 characters.".to_owned(),
                        ))
                    }
                    Some(key) => {
                        metadata.insert(key.to_owned(), value.clone());
                    }
                    None => {
                        return Err(ParamError::new(
                            "parameter_unknown",
                            name,
                            format!("Received unknown parameter: {name}"),
                        ))
                    }
                },
            }
        }
        if metadata.len() > 50 {
            return Err(ParamError::new(
                "parameter_invalid_string",
                "metadata",
                "You can have up to 50 metadata keys.".to_owned(),
            ));
        }
        let missing = |param: &str| {
            ParamError::new(
                "parameter_missing",
                param,
                format!("Missing required param: {param}."),
            )
        };
        let amount = amount.ok_or_else(|| missing("amount"))?;
        let currency = currency.ok_or_else(|| missing("currency"))?;
        if confirm && payment_method.is_none() {
            return Err(missing("payment_method"));
        }
        if confirm && may_redirect && return_url.is_none() {
            return Err(ParamError::new(
                "parameter_missing",
                "return_url",
                "This PaymentIntent is configured to accept payment methods enabled in your \
                 Dashboard, some of which may redirect your customer: provide a return_url, \
                 or set automatic_payment_methods[allow_redirects]=never or \
                 payment_method_types."
                    .to_owned(),
            ));
        }
        if return_url.is_some() && !confirm {
            return Err(ParamError::new(
                "parameter_invalid_string",
                "return_url",
                "The parameter return_url can only be used when confirm=true.".to_owned(),
            ));
        }
        let mut sorted = pairs;
        sorted.sort();
        let fingerprint = serde_json::to_string(&sorted).unwrap_or_default();
        Ok(Self {
            amount,
            currency,
            payment_method,
            confirm,
            description,
            metadata,
            capture_method,
            return_url,
            three_d_secure,
            site: String::new(),
            fingerprint,
        })
    }
}

pub(super) fn metadata_key(name: &str) -> Option<&str> {
    name.strip_prefix("metadata[")?.strip_suffix(']')
}

/// One `field:'value'` clause of a search query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Clause {
    Metadata { key: String, value: String },
    Field { field: String, value: String },
}

/// Parse the subset of Stripe's search language the sandbox supports: exact-match
/// clauses on `metadata['key']`, `status`, `currency`, `amount`, joined by `AND`.
pub(super) fn parse_query(query: &str) -> Result<Vec<Clause>, ParamError> {
    let unsupported = |detail: &str| {
        ParamError::new(
            "parameter_invalid_string",
            "query",
            format!("Unsupported search query ({detail}): {query}"),
        )
    };
    let mut clauses = Vec::new();
    let mut rest = query.trim();
    loop {
        let (clause, after) = parse_clause(rest).ok_or_else(|| unsupported("clause"))?;
        clauses.push(clause);
        rest = after.trim_start();
        if rest.is_empty() {
            return Ok(clauses);
        }
        rest = rest
            .strip_prefix("AND ")
            .ok_or_else(|| unsupported("only AND is supported"))?
            .trim_start();
    }
}

fn parse_clause(input: &str) -> Option<(Clause, &str)> {
    if let Some(after) = input.strip_prefix("metadata[") {
        let (key, after) = parse_quoted(after)?;
        let after = after.strip_prefix("]:")?;
        let (value, after) = parse_quoted(after)?;
        return Some((Clause::Metadata { key, value }, after));
    }
    let (field, after) = input.split_once(':')?;
    if !matches!(field, "status" | "currency" | "amount") {
        return None;
    }
    let (value, after) = parse_quoted(after)?;
    Some((
        Clause::Field {
            field: field.to_owned(),
            value,
        },
        after,
    ))
}

/// A `'…'` or `"…"` string with backslash escapes; returns it and what follows.
fn parse_quoted(input: &str) -> Option<(String, &str)> {
    let quote = input.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let mut value = String::new();
    let mut escaped = false;
    for (i, c) in input.char_indices().skip(1) {
        if escaped {
            value.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return Some((value, &input[i + c.len_utf8()..]));
        } else {
            value.push(c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confirm_that_may_redirect_needs_a_return_url() {
        let parse = |extra: &str| {
            CreateParams::parse(
                format!("amount=100&currency=eur&payment_method=pm_card_visa&confirm=true{extra}")
                    .as_bytes(),
            )
            .map(|_| ())
            .map_err(|e| e.param)
        };
        assert_eq!(parse(""), Err(Some("return_url".into())));
        for ok in [
            "&payment_method_types[0]=card",
            "&automatic_payment_methods[enabled]=true&automatic_payment_methods[allow_redirects]=never",
            "&off_session=true",
            "&return_url=https://shop.example/back",
        ] {
            assert_eq!(parse(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn three_d_secure_is_requested_by_any_and_other_values_are_refused() {
        let parse = |extra: &str| {
            CreateParams::parse(
                format!("amount=100&currency=eur&payment_method=pm_card_visa{extra}").as_bytes(),
            )
            .map(|p| p.three_d_secure)
            .map_err(|e| (e.code, e.param))
        };
        let option = "&payment_method_options%5Bcard%5D%5Brequest_three_d_secure%5D=";
        assert_eq!(parse(""), Ok(false));
        assert_eq!(parse(&format!("{option}any")), Ok(true));
        assert_eq!(parse(&format!("{option}automatic")), Ok(false));
        // `challenge` came with a later API version than the pinned one.
        assert_eq!(
            parse(&format!("{option}challenge")),
            Err((
                "parameter_invalid_string",
                Some(REQUEST_THREE_D_SECURE.into())
            ))
        );
        assert_eq!(
            parse("&payment_method_options%5Bcard%5D%5Bcapture_method%5D=manual"),
            Err((
                "parameter_unknown",
                Some("payment_method_options[card][capture_method]".into())
            ))
        );
    }

    #[test]
    fn search_query_with_metadata_and_escapes_parses() {
        assert_eq!(
            parse_query(r"metadata['attempt_id']:'pay_\'x' AND status:'succeeded'"),
            Ok(vec![
                Clause::Metadata {
                    key: "attempt_id".into(),
                    value: "pay_'x".into()
                },
                Clause::Field {
                    field: "status".into(),
                    value: "succeeded".into()
                },
            ])
        );
        assert!(parse_query("metadata['a']:'b' OR status:'x'").is_err());
        assert!(parse_query("customer:'cus_1'").is_err());
    }

    #[test]
    fn fingerprint_ignores_parameter_order() {
        let a =
            CreateParams::parse(b"amount=100&currency=eur&metadata[a]=1").map(|p| p.fingerprint);
        let b = CreateParams::parse(b"metadata%5Ba%5D=1&currency=eur&amount=100")
            .map(|p| p.fingerprint);
        assert_eq!(a, b);
        let c =
            CreateParams::parse(b"amount=101&currency=eur&metadata[a]=1").map(|p| p.fingerprint);
        assert_ne!(a, c);
    }

    #[test]
    fn invalid_parameters_are_named() {
        let err = |body: &[u8]| CreateParams::parse(body).err().map(|e| (e.code, e.param));
        assert_eq!(
            err(b"currency=eur"),
            Some(("parameter_missing", Some("amount".into())))
        );
        assert_eq!(
            err(b"amount=0&currency=eur"),
            Some(("parameter_invalid_integer", Some("amount".into())))
        );
        assert_eq!(
            err(b"amount=1&currency=eur&colour=red"),
            Some(("parameter_unknown", Some("colour".into())))
        );
        assert_eq!(
            err(b"amount=1&currency=eur&confirm=true"),
            Some(("parameter_missing", Some("payment_method".into())))
        );
        assert_eq!(
            err(b"amount=1&currency=eur&confirm=yes"),
            Some(("parameter_invalid_boolean", Some("confirm".into())))
        );
        for currency in ["xyz", "euro", "eu"] {
            let body = format!("amount=1&currency={currency}");
            assert_eq!(
                err(body.as_bytes()),
                Some(("parameter_invalid_string", Some("currency".into()))),
                "{currency}"
            );
        }
        assert!(CreateParams::parse(b"amount=1&currency=JPY").is_ok());
    }

    #[test]
    fn booleans_as_stripe_python_sends_them_parse() {
        let confirm = |body: &[u8]| CreateParams::parse(body).map(|p| p.confirm);
        assert_eq!(
            confirm(
                b"amount=1&currency=eur&payment_method=pm_card_visa&confirm=True&off_session=True"
            ),
            Ok(true)
        );
        assert_eq!(confirm(b"amount=1&currency=eur&confirm=False"), Ok(false));
    }
}

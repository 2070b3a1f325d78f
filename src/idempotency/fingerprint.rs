//! The request fingerprint: SHA-256 over method, path and the canonical JSON body (object
//! keys sorted, no insignificant whitespace), so the same JSON value with other key order
//! or spacing is the same request, and any other value, path or method is not.

use serde_json::Value;
use sha2::{Digest, Sha256};

pub type Fingerprint = [u8; 32];

/// `body` is `None` for requests without one (a cancel).
pub fn fingerprint(method: &str, path: &str, body: Option<&Value>) -> Fingerprint {
    let mut hasher = Sha256::new();
    hasher.update(method.as_bytes());
    hasher.update(b"\n");
    hasher.update(path.as_bytes());
    hasher.update(b"\n");
    if let Some(body) = body {
        hasher.update(canonical_json(body).as_bytes());
    }
    hasher.finalize().into()
}

/// serde_json keeps object members in a sorted map (no `preserve_order`), and its compact
/// writer adds no whitespace: together, one text per JSON value. Numbers are parsed exactly
/// (its `float_roundtrip` feature), so that text reads back as the same value.
pub fn canonical_json(value: &Value) -> String {
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z0-9 \"\\\\é]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Writes `value` with object members in reverse order and random-ish spacing.
    fn reserialise(value: &Value, spaced: bool) -> String {
        let sp = if spaced { " \n\t" } else { "" };
        match value {
            Value::Object(map) => {
                let members: Vec<String> = map
                    .iter()
                    .rev()
                    .map(|(k, v)| format!("{}{sp}:{sp}{}", json!(k), reserialise(v, spaced)))
                    .collect();
                format!("{{{sp}{}{sp}}}", members.join(&format!(",{sp}")))
            }
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(|v| reserialise(v, spaced)).collect();
                format!("[{sp}{}{sp}]", items.join(&format!("{sp},{sp}")))
            }
            other => other.to_string(),
        }
    }

    proptest! {
        #[test]
        fn any_reserialisation_of_a_value_has_the_same_fingerprint(value in arb_json(), spaced: bool) {
            let text = reserialise(&value, spaced);
            let reparsed: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(
                fingerprint("POST", "/v1/orders", Some(&value)),
                fingerprint("POST", "/v1/orders", Some(&reparsed))
            );
        }

        #[test]
        fn another_value_has_another_fingerprint(a in arb_json(), b in arb_json()) {
            prop_assume!(a != b);
            prop_assert_ne!(
                fingerprint("POST", "/v1/orders", Some(&a)),
                fingerprint("POST", "/v1/orders", Some(&b))
            );
        }
    }

    #[test]
    fn method_and_path_are_part_of_the_fingerprint() {
        let body = json!({"amount": 100});
        let base = fingerprint("POST", "/v1/orders", Some(&body));
        assert_ne!(base, fingerprint("POST", "/v1/checkout", Some(&body)));
        assert_ne!(base, fingerprint("PUT", "/v1/orders", Some(&body)));
        assert_ne!(
            fingerprint("POST", "/v1/orders/a/cancel", None),
            fingerprint("POST", "/v1/orders/b/cancel", None)
        );
    }

    /// Found by the fuzzer: without exact float parsing, a number read back from its
    /// canonical text was another number, so a body's canonical form was not one text.
    #[test]
    fn the_canonical_text_of_a_number_reads_back_as_that_number() {
        for text in [
            "7777777770000000005666690000000005877772",
            "7.77777777e+39",
            "0.1",
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            let canonical = canonical_json(&value);
            let back: Value = serde_json::from_str(&canonical).unwrap();
            assert_eq!(back, value, "{text}");
            assert_eq!(canonical_json(&back), canonical, "{text}");
        }
    }
}

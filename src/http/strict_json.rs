//! A JSON body read strictly: a member name given twice in one object is refused instead of
//! the last one silently winning (`{"amount": 100, "amount": 5}` must not make an order for
//! 5 that a reviewer of the request would read as 100).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::http::card_data::{contains_card_number, REDACTED};

/// A JSON value with no duplicate member names at any depth.
#[derive(Debug, Clone, PartialEq)]
pub struct StrictJson(pub Value);

impl std::ops::Deref for StrictJson {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.0
    }
}

impl<'de> Deserialize<'de> for StrictJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictJson)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(StrictJson(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            let StrictJson(value) = map.next_value()?;
            if members.contains_key(&name) {
                // The name is repeated back unless it is card data.
                let shown = if contains_card_number(&name) {
                    REDACTED
                } else {
                    name.as_str()
                };
                return Err(de::Error::custom(format!(
                    "the member {shown:?} is given twice in one object; send it once"
                )));
            }
            members.insert(name, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Value, String> {
        serde_json::from_str::<StrictJson>(text)
            .map(|s| s.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn duplicate_members_are_refused_at_any_depth() {
        assert!(read(r#"{"amount":100,"amount":5}"#)
            .unwrap_err()
            .contains("\"amount\" is given twice"));
        assert!(read(r#"{"metadata":{"a":"1","a":"2"}}"#).is_err());
        assert!(read(r#"[{"a":1},{"b":1,"b":2}]"#).is_err());
    }

    #[test]
    fn a_card_number_given_twice_is_not_repeated_back() {
        let err = read(r#"{"4242424242424242":1,"4242424242424242":2}"#).unwrap_err();
        assert!(!err.contains("4242"), "{err}");
    }

    #[test]
    fn anything_else_reads_as_serde_json_would() {
        let text = r#"{"a":[1,-2,3.5,true,null,"x",{"b":{}}],"c":"é\u0041"}"#;
        assert_eq!(
            read(text).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        // The same name in two different objects is fine.
        assert!(read(r#"{"a":{"k":1},"b":{"k":2}}"#).is_ok());
    }
}

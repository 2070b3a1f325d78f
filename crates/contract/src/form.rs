//! Stripe's form encoding (`application/x-www-form-urlencoded` with brackets, its query
//! strings too) decoded into the JSON value its schema describes: `metadata[attempt_id]=a`
//! is `{"metadata": {"attempt_id": "a"}}`, `expand[0]=x&expand[1]=y` and `expand[]=x` are
//! arrays. Every leaf stays a string, as on the wire; the schema check reads it as the type
//! its schema asks for (`schema`, form semantics).

use serde_json::{Map, Value};

/// A key's place in the tree being built: keys in the order they came.
enum Node {
    Leaf(String),
    Branch(Vec<(String, Node)>),
}

/// A form body or query string as a JSON object. Refused: a key given twice, one given both
/// as a value and as an object (`metadata=&metadata[a]=b`), or brackets that do not close.
pub fn decode_form(body: &[u8]) -> Result<Value, String> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_bytes(body).map_err(|e| format!("not a form: {e}"))?;
    let mut root = Vec::new();
    for (key, value) in pairs {
        let path = split_key(&key)?;
        insert(&mut root, &path, value, &key)?;
    }
    let mut object = Map::new();
    for (key, node) in root {
        object.insert(key, node.into_value());
    }
    Ok(Value::Object(object))
}

/// `a[b][0]` → `["a", "b", "0"]`; `a[]` → `["a", ""]`.
fn split_key(key: &str) -> Result<Vec<String>, String> {
    let (name, mut rest) = match key.find('[') {
        Some(at) => (&key[..at], &key[at..]),
        None => (key, ""),
    };
    if name.is_empty() {
        return Err(format!("{key:?}: a key must start with a name"));
    }
    let mut path = vec![name.to_owned()];
    while !rest.is_empty() {
        let inner = rest
            .strip_prefix('[')
            .and_then(|r| r.find(']').map(|end| (&r[..end], &r[end + 1..])));
        let Some((segment, after)) = inner else {
            return Err(format!("{key:?}: brackets that do not close"));
        };
        if segment.contains('[') {
            return Err(format!("{key:?}: a bracket inside brackets"));
        }
        path.push(segment.to_owned());
        rest = after;
    }
    Ok(path)
}

fn insert(
    branch: &mut Vec<(String, Node)>,
    path: &[String],
    value: String,
    key: &str,
) -> Result<(), String> {
    let (first, rest) = path.split_first().expect("a key has a name");
    // `[]` appends: each one is a new element, never an earlier one.
    let existing = if first.is_empty() {
        None
    } else {
        branch.iter_mut().position(|(k, _)| k == first)
    };
    if rest.is_empty() {
        if existing.is_some() {
            return Err(format!(
                "{key:?} given twice, or both as a value and an object"
            ));
        }
        branch.push((first.clone(), Node::Leaf(value)));
        return Ok(());
    }
    let at = match existing {
        Some(at) => at,
        None => {
            branch.push((first.clone(), Node::Branch(Vec::new())));
            branch.len() - 1
        }
    };
    match &mut branch[at].1 {
        Node::Branch(children) => insert(children, rest, value, key),
        Node::Leaf(_) => Err(format!("{key:?}: {first:?} is both a value and an object")),
    }
}

impl Node {
    /// A branch whose keys are all indices (`0`, `1`, …) or all `[]` is an array, in index
    /// order; any other branch is an object.
    fn into_value(self) -> Value {
        match self {
            Node::Leaf(text) => Value::String(text),
            Node::Branch(children) => {
                let all_appended = children.iter().all(|(k, _)| k.is_empty());
                let all_indices = children
                    .iter()
                    .all(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
                if all_appended {
                    Value::Array(children.into_iter().map(|(_, n)| n.into_value()).collect())
                } else if all_indices {
                    let mut indexed: Vec<(u128, Node)> = children
                        .into_iter()
                        .map(|(k, n)| (k.parse().unwrap_or(u128::MAX), n))
                        .collect();
                    indexed.sort_by_key(|(index, _)| *index);
                    Value::Array(indexed.into_iter().map(|(_, n)| n.into_value()).collect())
                } else {
                    Value::Object(
                        children
                            .into_iter()
                            .map(|(k, n)| (k, n.into_value()))
                            .collect(),
                    )
                }
            }
        }
    }
}

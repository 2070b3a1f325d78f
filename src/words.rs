//! `words!`: an enum whose every variant is stored as one word (a database domain's or
//! CHECK's), declared once with its word beside it. It derives what used to be written out
//! beside each such enum and drifted from it: `ALL`, `as_str`, `parse`. tests/api/
//! schema_mirrors.rs holds each `ALL` to its database list, and the round-trip tests iterate
//! `ALL`, so a new variant is checked without touching a test.

/// `words! { /// doc  pub enum Name { /// doc  Variant => "word", … } }`: the enum (`Debug`,
/// `Clone`, `Copy`, `PartialEq`, `Eq`, `Hash`), `Name::ALL` (every variant, in order),
/// `as_str` and `parse` (its inverse over `ALL`). Two variants with one word fail to compile.
macro_rules! words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $word:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every variant, in the order declared.
            pub const ALL: [$name; [$($word),+].len()] = [$($name::$variant),+];

            /// The word stored for it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word ),+
                }
            }

            /// The variant stored as `raw`, if any.
            pub fn parse(raw: &str) -> Option<Self> {
                Self::ALL.into_iter().find(|v| v.as_str() == raw)
            }
        }

        // Checked when compiled: a word names one variant, or `parse` could not undo `as_str`.
        const _: () = assert!(
            $crate::words::distinct(&[$($word),+]),
            concat!("two variants of ", stringify!($name), " share a word"),
        );
    };
}

pub(crate) use words;

/// No two of `words` are equal (for `words!`'s compile-time check).
pub const fn distinct(words: &[&str]) -> bool {
    let mut i = 0;
    while i < words.len() {
        let mut j = i + 1;
        while j < words.len() {
            if same(words[i], words[j]) {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::distinct;

    #[test]
    fn distinct_finds_a_repeated_word() {
        assert!(distinct(&["a", "ab", "b"]));
        assert!(!distinct(&["a", "ab", "a"]));
        assert!(distinct(&[]));
    }
}

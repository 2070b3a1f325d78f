//! Strings in one allocation. A kept intent has a dozen short strings (its id, its metadata,
//! its keys); as `String`s each costs an allocation of its own and 24 bytes besides, which
//! over the window of intents the sandbox keeps (docs/operations/running.md, "The sandbox's memory") is most of
//! what an intent costs.

/// Strings, each behind its length (LEB128: one byte below 128), in one boxed buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Packed(Box<[u8]>);

impl Packed {
    pub(super) fn new<'a>(items: impl IntoIterator<Item = &'a str>) -> Packed {
        let mut buffer = Vec::new();
        for item in items {
            let mut len = item.len();
            while len >= 0x80 {
                buffer.push((len & 0x7f) as u8 | 0x80);
                len >>= 7;
            }
            buffer.push(len as u8);
            buffer.extend_from_slice(item.as_bytes());
        }
        Packed(buffer.into_boxed_slice())
    }

    /// The strings, in the order they were packed.
    pub(super) fn iter(&self) -> Iter<'_> {
        Iter(&self.0)
    }
}

pub(super) struct Iter<'a>(&'a [u8]);

impl<'a> Iter<'a> {
    fn next_bytes(&mut self) -> Option<&'a [u8]> {
        let mut len = 0usize;
        let mut shift = 0;
        loop {
            let (&byte, rest) = self.0.split_first()?;
            self.0 = rest;
            len |= usize::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let (item, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        Some(item)
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        // Every item was a `&str`, cut at its own bounds: this never fails.
        std::str::from_utf8(self.next_bytes()?).ok()
    }

    /// Skips without checking what it skips (`skip` and `nth` are how fields are reached).
    fn nth(&mut self, n: usize) -> Option<&'a str> {
        for _ in 0..n {
            self.next_bytes()?;
        }
        self.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_come_back_as_packed_whatever_their_length() {
        let long = "é".repeat(200);
        let items = ["", "pi_x", long.as_str(), "\0", "last"];
        let packed = Packed::new(items);
        assert_eq!(packed.iter().collect::<Vec<_>>(), items);
        // One length byte for a short string, two for 400 bytes.
        assert_eq!(packed.0.len(), 1 + 5 + 402 + 2 + 5);
        assert_eq!(Packed::new([]).iter().next(), None);
    }
}

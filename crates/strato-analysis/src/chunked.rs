//! [`Chunked`]: append-only storage for the copies a streamed analysis keeps per event.
//!
//! A `Vec` grown by pushing doubles its capacity: a stream that keeps 2.4 million 32-byte
//! copies holds room for 4.2 million, and while it grows the old and the new buffer are both
//! alive (up to three times what is kept). Chunks of at most [`CHUNK`] elements are never
//! moved: what is held is what is kept plus at most one chunk, and
//! [`Chunked::into_vec`] gathers them into one exact-size `Vec` a chunk at a time.

/// The largest chunk, in elements. The first chunks are smaller (doubling from
/// [`FIRST_CHUNK`]), so that the many short lists a stream keeps (one per track, say) hold
/// little room.
const CHUNK: usize = 1 << 16;
/// The first chunk, in elements.
const FIRST_CHUNK: usize = 16;

/// Append-only storage without reallocation (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    pub(crate) fn push(&mut self, value: T) {
        let full = self.chunks.last().is_none_or(|c| c.len() == c.capacity());
        if full {
            let size = self
                .chunks
                .last()
                .map_or(FIRST_CHUNK, |c| (c.capacity() * 2).min(CHUNK));
            self.chunks.push(Vec::with_capacity(size));
        }
        if let Some(chunk) = self.chunks.last_mut() {
            chunk.push(value);
        }
        self.len += 1;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The elements in the order they were pushed.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + Clone + '_ {
        self.chunks.iter().flatten()
    }

    /// The elements in the order they were pushed, in one `Vec` of exactly their number
    /// (each chunk freed once moved).
    pub(crate) fn into_vec(self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len);
        for chunk in self.chunks {
            out.extend(chunk);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_order_across_chunks_and_holds_little_room() {
        let mut kept = Chunked::default();
        assert!(kept.is_empty());
        let n = 3 * CHUNK + 5;
        for i in 0..n {
            kept.push(i);
        }
        assert!(kept.iter().copied().eq(0..n));
        let room: usize = kept.chunks.iter().map(Vec::capacity).sum();
        assert!(room < n + CHUNK, "{room} elements of room for {n}");
        let all = kept.into_vec();
        assert_eq!((all.len(), all.capacity()), (n, n));
        assert!(all.into_iter().eq(0..n));
    }
}

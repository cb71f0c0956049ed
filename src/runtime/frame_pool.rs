//! Buffers for large response frames, used again once every record taken
//! from a frame is gone.
//!
//! A Fetch response of several MB read into a fresh allocation costs the
//! zeroing of every byte (safe Rust reads only into initialised memory)
//! and, for allocations this large, page faults on memory the allocator
//! has just handed back to the kernel. A buffer that comes back here keeps
//! its initialised length, so reading the next frame into it costs
//! neither: only bytes beyond anything the buffer held before are zeroed.
//!
//! A frame goes to the cluster as [`Bytes`] whose owner returns the buffer
//! when the last slice of it (a response body, a record's value held by
//! the application) is dropped. At most [`KEEP_BUFFERS`] buffers and
//! [`KEEP_BYTES`] bytes are kept; anything beyond is freed.
//!
//! The buffer given out is the one given back last, when it is long enough
//! and not more than twice as long as asked (else the smallest long enough
//! one): it is the one used most recently, so more of it is still in the
//! CPU's caches, and the kernel's copy of the next frame into it costs
//! less than into a buffer untouched for longer (measured against the
//! smallest buffer taken first: docs/benchmarks.md, "The pool gives out
//! the buffer given back last").

use bytes::Bytes;
use std::sync::{Arc, Mutex, PoisonError};

/// Frames smaller than this get a buffer of their own: zeroing them costs
/// little, and a small response (Metadata, a heartbeat) whose decoded
/// parts live on must not hold a large buffer.
pub(crate) const POOLED_FROM: usize = 64 * 1024;
/// How many buffers are kept for reuse.
pub(crate) const KEEP_BUFFERS: usize = 8;
/// How many bytes the kept buffers may hold in all.
pub(crate) const KEEP_BYTES: usize = 64 * 1024 * 1024;

/// Where a pooled frame's body (what follows its 4-byte size prefix)
/// starts in memory: on a page boundary. The kernel copies a response into
/// the buffer at the address the body starts at, and its copy runs faster
/// into an aligned destination (measured in docs/benchmarks.md, "Where
/// the body lands").
pub(crate) const BODY_ALIGN: usize = 4096;

/// A buffer for one frame: the size prefix in place, the body to be read
/// into [`FrameBuf::body`]; [`FramePool::finish`] makes it a frame.
#[derive(Debug)]
pub(crate) struct FrameBuf {
    buf: Vec<u8>,
    /// Where the size prefix starts.
    start: usize,
    /// The body's size.
    size: usize,
}

impl FrameBuf {
    /// The body, to read into.
    pub fn body(&mut self) -> &mut [u8] {
        let from = self.start + 4;
        &mut self.buf[from..from + self.size]
    }
}

/// The buffers kept for reuse, shared by every socket of one client.
#[derive(Debug, Clone, Default)]
pub(crate) struct FramePool(Arc<Mutex<Kept>>);

#[derive(Debug, Default)]
struct Kept {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl FramePool {
    /// A zero-filled or reused buffer of at least `len` initialised bytes
    /// (their content is unspecified).
    pub fn take(&self, len: usize) -> Vec<u8> {
        if len < POOLED_FROM {
            return vec![0; len];
        }
        let reused = {
            let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            // The last given back of those long enough and at most twice
            // `len`; else the smallest long enough; else the longest, to
            // grow. (`buffers` is in the order they came back.)
            let long_enough = || {
                kept.buffers
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.len() >= len)
            };
            let fit = long_enough()
                .rfind(|(_, b)| b.len() <= len.saturating_mul(2))
                .or_else(|| long_enough().min_by_key(|(_, b)| b.len()))
                .or_else(|| kept.buffers.iter().enumerate().max_by_key(|(_, b)| b.len()))
                .map(|(i, _)| i);
            fit.map(|i| {
                let b = kept.buffers.remove(i);
                kept.bytes -= b.len();
                b
            })
        };
        match reused {
            Some(mut b) => {
                if b.len() < len {
                    b.resize(len, 0);
                }
                b
            }
            None => vec![0; len],
        }
    }

    /// A buffer for a frame whose size prefix is `prefix` and whose body is
    /// `size` bytes long: a pooled one (see [`FramePool::take`]) with its
    /// body at a multiple of [`BODY_ALIGN`] when the frame is large enough
    /// to be pooled, else one of its own.
    pub fn frame_buf(&self, prefix: [u8; 4], size: usize) -> FrameBuf {
        let len = 4 + size;
        let pooled = len >= POOLED_FROM;
        let mut buf = self.take(if pooled { len + BODY_ALIGN } else { len });
        // Only the address is read, to find the aligned spot.
        let at = buf.as_ptr() as usize;
        let start = if pooled {
            (at + 4).next_multiple_of(BODY_ALIGN) - 4 - at
        } else {
            0
        };
        buf[start..start + 4].copy_from_slice(&prefix);
        FrameBuf { buf, start, size }
    }

    /// The frame (size prefix and body) in `buf`, without a copy.
    pub fn finish(&self, buf: FrameBuf) -> Bytes {
        let FrameBuf { buf, start, size } = buf;
        self.frame(buf, start + 4 + size).slice(start..)
    }

    /// Wraps the first `len` bytes of `buf` (from [`FramePool::take`]) as a
    /// frame; `buf` comes back to the pool when the last slice is dropped.
    pub fn frame(&self, buf: Vec<u8>, len: usize) -> Bytes {
        debug_assert!(len <= buf.len());
        if buf.len() < POOLED_FROM {
            let mut buf = buf;
            buf.truncate(len);
            return Bytes::from(buf);
        }
        Bytes::from_owner(Frame {
            buf,
            len,
            pool: self.clone(),
        })
    }

    /// Keeps `buf` for reuse, or frees it when the pool is full.
    fn give_back(&self, buf: Vec<u8>) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.buffers.len() < KEEP_BUFFERS && kept.bytes + buf.len() <= KEEP_BYTES {
            kept.bytes += buf.len();
            kept.buffers.push(buf);
        }
    }

    /// How many buffers are kept, and their bytes.
    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (kept.buffers.len(), kept.bytes)
    }
}

/// The owner behind a pooled frame's [`Bytes`].
struct Frame {
    buf: Vec<u8>,
    len: usize,
    pool: FramePool,
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`FramePool::frame_buf`]'s contract: the frame reads back as
    /// written, size prefix and body, wherever the body is placed; a
    /// pooled body is placed at a multiple of [`BODY_ALIGN`] (what that
    /// placement is worth is measured in docs/benchmarks.md, not here),
    /// a small frame is exactly its bytes.
    #[test]
    fn a_large_frame_body_starts_on_a_page_boundary_and_reads_back_whole() {
        let pool = FramePool::default();
        let size = 3 * POOLED_FROM;
        let mut buf = pool.frame_buf([0, 3, 0, 0], size);
        let body = buf.body();
        assert_eq!(body.len(), size);
        assert_eq!(body.as_ptr() as usize % BODY_ALIGN, 0);
        body.fill(7);
        let frame = pool.finish(buf);
        assert_eq!(frame.len(), 4 + size);
        assert_eq!(&frame[..4], &[0, 3, 0, 0]);
        assert!(frame[4..].iter().all(|&b| b == 7));
        drop(frame);
        assert_eq!(pool.kept().0, 1, "the buffer came back");
        // A small frame: a buffer of its own, exactly the frame.
        let mut buf = pool.frame_buf([0, 0, 0, 2], 2);
        buf.body().copy_from_slice(b"hi");
        assert_eq!(&pool.finish(buf)[..], b"\0\0\0\x02hi");
    }

    /// A small response whose decoded parts live on (Metadata, a
    /// heartbeat) holds a buffer of its own size, never a large one the
    /// pool keeps, and adds nothing to what the pool keeps.
    #[test]
    fn a_small_frame_never_holds_a_large_buffer() {
        let pool = FramePool::default();
        let large = pool.take(2 * POOLED_FROM);
        drop(pool.frame(large, 2 * POOLED_FROM));
        assert_eq!(pool.kept(), (1, 2 * POOLED_FROM));
        let buf = pool.take(100);
        assert_eq!(buf.len(), 100);
        assert_eq!(
            pool.kept(),
            (1, 2 * POOLED_FROM),
            "the large one stays kept"
        );
        let frame = pool.frame(buf, 100);
        assert_eq!(frame.len(), 100);
        drop(frame);
        assert_eq!(pool.kept(), (1, 2 * POOLED_FROM));
    }

    /// A pooled buffer is given out again only once no slice of its frame
    /// is left (a record's value the application holds stays as it was),
    /// and then it is the same allocation (its content unspecified, as
    /// [`FramePool::take`] says).
    #[test]
    fn a_buffer_comes_back_when_its_last_slice_is_dropped() {
        let pool = FramePool::default();
        let mut buf = pool.take(POOLED_FROM);
        buf[..5].copy_from_slice(b"hello");
        let at = buf.as_ptr();
        let frame = pool.frame(buf, 5);
        assert_eq!(&frame[..], b"hello");
        let body = frame.slice(1..);
        drop(frame);
        assert_eq!(pool.kept(), (0, 0), "a slice still holds the buffer");
        // Another frame meanwhile gets another buffer: the slice held
        // stays as it was.
        let mut other = pool.take(POOLED_FROM);
        assert_ne!(other.as_ptr(), at);
        other.fill(0xee);
        assert_eq!(&body[..], b"ello");
        drop(body);
        assert_eq!(pool.kept(), (1, POOLED_FROM));
        // Taken again: the same allocation, no larger.
        let again = pool.take(POOLED_FROM);
        assert_eq!((again.as_ptr(), again.len()), (at, POOLED_FROM));
        assert_eq!(pool.kept(), (0, 0));
    }

    /// [`FramePool::take`]'s choice rule, as its documentation states it
    /// (which buffer serves a frame; what the rule is worth is measured
    /// in docs/benchmarks.md, not here): the last given back of those
    /// long enough and at most twice the length asked, else the smallest
    /// long enough.
    #[test]
    fn the_last_buffer_given_back_is_taken_first_unless_far_too_long() {
        let pool = FramePool::default();
        let sizes = [
            2 * POOLED_FROM,
            3 * POOLED_FROM,
            2 * POOLED_FROM,
            8 * POOLED_FROM,
        ];
        let bufs: Vec<_> = sizes.iter().map(|&n| pool.take(n)).collect();
        for (tag, mut b) in bufs.into_iter().enumerate() {
            b[0] = tag as u8;
            let n = b.len();
            drop(pool.frame(b, n));
        }
        // The 8× one came back last but is more than twice too long: the
        // last of the others that fit (the second 2×), then the 3× one.
        let first = pool.take(2 * POOLED_FROM);
        assert_eq!((first.len(), first[0]), (2 * POOLED_FROM, 2));
        let second = pool.take(2 * POOLED_FROM);
        assert_eq!((second.len(), second[0]), (3 * POOLED_FROM, 1));
        // Only the 2× and the 8× left; nothing within twice 3×: the
        // smallest long enough.
        assert_eq!(pool.take(3 * POOLED_FROM + 1)[0], 3);
        assert_eq!(pool.kept(), (1, 2 * POOLED_FROM));
    }

    /// [`FramePool::take`]'s choice rule, continued: with none within
    /// twice the length asked, the smallest long enough; with none long
    /// enough, the longest grows to the length asked.
    #[test]
    fn the_smallest_long_enough_buffer_is_taken_and_a_short_one_grows() {
        let pool = FramePool::default();
        let sizes = [POOLED_FROM, 3 * POOLED_FROM, 2 * POOLED_FROM];
        let bufs: Vec<_> = sizes.iter().map(|&n| pool.take(n)).collect();
        for b in bufs {
            let n = b.len();
            drop(pool.frame(b, n));
        }
        assert_eq!(pool.kept(), (3, 6 * POOLED_FROM));
        assert_eq!(pool.take(POOLED_FROM + 1).len(), 2 * POOLED_FROM);
        // Nothing long enough now but the longest: it grows.
        assert_eq!(pool.take(4 * POOLED_FROM).len(), 4 * POOLED_FROM);
        assert_eq!(pool.kept(), (1, POOLED_FROM));
    }

    /// The pool's memory is bounded (docs/architecture.md: at most
    /// [`KEEP_BUFFERS`] buffers and [`KEEP_BYTES`] bytes are kept), however
    /// many frames come back.
    #[test]
    fn the_pool_keeps_a_bounded_number_of_buffers_and_bytes() {
        let pool = FramePool::default();
        let frames: Vec<_> = (0..KEEP_BUFFERS + 3)
            .map(|_| pool.frame(pool.take(POOLED_FROM), POOLED_FROM))
            .collect();
        drop(frames);
        assert_eq!(pool.kept(), (KEEP_BUFFERS, KEEP_BUFFERS * POOLED_FROM));
        let pool = FramePool::default();
        let big = KEEP_BYTES / 2 + 1;
        let frames: Vec<_> = (0..2).map(|_| pool.frame(pool.take(big), big)).collect();
        drop(frames);
        assert_eq!(pool.kept(), (1, big), "two would exceed KEEP_BYTES");
    }
}

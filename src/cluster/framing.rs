//! Response framing, in one place for the runtime's socket reader and the
//! connection manager: the `int32` size prefix checked against the
//! frame-size limit ([`body_len`]), a connection's received bytes cut
//! into whole frames ([`ResponseFrames`]), and a response frame's
//! correlation id and header split from its body ([`split_response`]).
//!
//! The runtime's reader reads a prefix, checks it with [`body_len`] before
//! it buffers a byte of the body, and hands each whole frame (prefix
//! included) to [`Cluster::handle_received`](super::Cluster::handle_received),
//! which takes it as it is, without a copy. Bytes cut anywhere else (a
//! simulated network, a prefix the reader refused) are joined here until
//! they make whole frames.

use crate::protocol::frame::{frame_size, ResponseHeader};
use crate::protocol::{DecodeError, FrameDecoder, FrameError, Reader};
use bytes::{Bytes, BytesMut};

/// Checks a frame's 4-byte size prefix against `max_frame_size`: the
/// length of the body that follows.
pub(crate) fn body_len(prefix: [u8; 4], max_frame_size: usize) -> Result<usize, FrameError> {
    frame_size(prefix, max_frame_size)
}

/// One connection's received bytes, cut into whole response frames.
#[derive(Debug)]
pub(crate) struct ResponseFrames {
    /// Cuts frames off `partial`, refusing those over the limit.
    decoder: FrameDecoder,
    /// Bytes received that do not make a whole frame yet.
    partial: BytesMut,
}

impl ResponseFrames {
    /// Refusing frames larger than `max_frame_size`.
    pub fn new(max_frame_size: usize) -> Self {
        ResponseFrames {
            decoder: FrameDecoder::new(max_frame_size),
            partial: BytesMut::new(),
        }
    }

    /// The contents of `bytes` (its prefix removed), when it is exactly
    /// one whole frame and nothing waits before it: the usual case, as the
    /// runtime's reader delivers frames, taken without a copy.
    pub fn whole(&self, bytes: &Bytes) -> Option<Bytes> {
        let prefix = bytes.get(..4)?;
        let prefix = [prefix[0], prefix[1], prefix[2], prefix[3]];
        let size = body_len(prefix, self.decoder.max_frame_size()).ok()?;
        (self.partial.is_empty() && size + 4 == bytes.len()).then(|| bytes.slice(4..))
    }

    /// Keeps `bytes` after those received before, to be cut into frames by
    /// [`ResponseFrames::next_frame`].
    pub fn push(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
    }

    /// Takes the next whole frame's contents (prefix removed) off the
    /// bytes kept, or `Ok(None)` when more bytes are needed. The size
    /// prefix is checked as soon as its four bytes are in, so an oversized
    /// frame fails before its body is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        self.decoder.decode(&mut self.partial)
    }
}

/// The correlation id a response frame's contents (prefix removed) start
/// with; -1 for contents too short to hold one.
pub(crate) fn correlation_id(frame: &[u8]) -> i32 {
    crate::protocol::frame::peek_correlation_id(frame).unwrap_or(-1)
}

/// Splits a response frame's contents (prefix removed) into its header,
/// read at `header_version`, and its body.
pub(crate) fn split_response(frame: Bytes, header_version: i16) -> Result<Bytes, DecodeError> {
    let mut reader = Reader::new(frame);
    ResponseHeader::decode(&mut reader, header_version)?;
    Ok(reader
        .take("response body", reader.remaining())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(contents: &[u8]) -> Bytes {
        let mut f = (contents.len() as i32).to_be_bytes().to_vec();
        f.extend_from_slice(contents);
        Bytes::from(f)
    }

    /// [`ResponseFrames::whole`]'s contract: the body of bytes that are
    /// exactly one whole frame within the limit; anything else (short,
    /// long, over the limit) is left to [`ResponseFrames::push`], which
    /// joins and checks it (and, as the next test shows, so is a whole
    /// frame while bytes wait before it, so that frames keep their order).
    #[test]
    fn whole_takes_exactly_one_whole_frame_within_the_limit() {
        let frames = ResponseFrames::new(16);
        let f = frame(&[1, 2, 3]);
        assert_eq!(frames.whole(&f).as_deref(), Some(&[1u8, 2, 3][..]));
        // Too short, too long, or over the limit: not one whole frame.
        assert_eq!(frames.whole(&f.slice(..3)), None);
        assert_eq!(frames.whole(&Bytes::from([&f[..], &[9]].concat())), None);
        assert_eq!(frames.whole(&frame(&[0; 17])), None);
    }

    #[test]
    fn bytes_cut_anywhere_are_joined_into_frames() {
        let mut frames = ResponseFrames::new(16);
        let two = [&frame(&[1, 2])[..], &frame(&[3])[..]].concat();
        frames.push(&two[..3]);
        assert_eq!(frames.next_frame(), Ok(None));
        // Something waits: a whole frame is no longer taken as it is.
        assert_eq!(frames.whole(&frame(&[7])), None);
        frames.push(&two[3..]);
        assert_eq!(frames.next_frame(), Ok(Some(Bytes::from_static(&[1, 2]))));
        assert_eq!(frames.next_frame(), Ok(Some(Bytes::from_static(&[3]))));
        assert_eq!(frames.next_frame(), Ok(None));
    }

    #[test]
    fn a_prefix_over_the_limit_fails_before_its_body() {
        let mut frames = ResponseFrames::new(16);
        frames.push(&[0, 0, 0, 17]);
        assert_eq!(
            frames.next_frame(),
            Err(FrameError::TooLarge { size: 17, max: 16 })
        );
        assert_eq!(
            body_len([0xff, 0xff, 0xff, 0xfe], 16),
            Err(FrameError::NegativeSize(-2))
        );
    }

    #[test]
    fn a_response_is_split_into_its_correlation_id_and_body() {
        let contents = Bytes::from_static(&[0, 0, 0, 42, 0, 7, 8]);
        assert_eq!(correlation_id(&contents), 42);
        assert_eq!(correlation_id(&[0, 1]), -1);
        // Header v1: a tagged-field section (empty) after the id.
        assert_eq!(
            split_response(contents.clone(), 1).unwrap(),
            Bytes::from_static(&[7, 8])
        );
        assert_eq!(
            split_response(contents, 0).unwrap(),
            Bytes::from_static(&[0, 7, 8])
        );
    }
}

//! Records fetched and not yet returned ([`Buffer`]), read lazily: a
//! record set is decoded a chunk at a time as its records are taken
//! ([`DecodeJob`]), its batch headers read when it comes (where it ends,
//! how many records it holds), and its CRCs checked once the next Fetch
//! is out ([`crcs_hold`]).

use super::{FetchError, TopicPartition};
use crate::protocol::DEFAULT_MAX_FRAME_SIZE;
use crate::records::{
    self, DecodeOptions, DecodedRecords, IsolationLevel, OwnedRecord, PartialTail,
    RecordSetDecoder, RecordsError,
};
use bytes::Bytes;

/// Records fetched and not yet returned, all at or after the position.
#[derive(Debug)]
pub(super) struct Buffer {
    /// Which buffer this is (unique in its fetcher): a decoded chunk is
    /// put back only into the buffer it was taken from.
    pub(super) id: u64,
    /// Its next chunk is being decoded by a [`DecodeJob`]: it is skipped
    /// until the chunk is put back ([`Fetcher::put_decoded`](super::Fetcher::put_decoded)).
    pub(super) decoding: bool,
    pub(super) records: std::vec::IntoIter<OwnedRecord>,
    /// Where the position goes once every record is taken: past the last
    /// complete batch, which may lie beyond the last record.
    pub(super) next_offset: i64,
    /// Surfaced (and the partition halted) once the records are taken.
    pub(super) error: Option<FetchError>,
    /// The rest of the record set, decoded when `records` runs out (see
    /// [`decode_some`]).
    pub(super) undecoded: Bytes,
    /// The fetch offset it was fetched from.
    pub(super) from: i64,
    /// Where its complete batches end, read off their headers when it came
    /// (see [`batches_end`]): where a Fetch ahead of it starts.
    pub(super) end: Option<BatchesEnd>,
    /// Whether a Fetch ahead of it was sent: one per buffer, whatever came
    /// of it.
    pub(super) ahead_sent: bool,
    /// Whether the CRCs of its undecoded whole batches were checked (see
    /// [`crcs_hold`] and [`Fetcher::check_pending_crcs`](super::Fetcher::check_pending_crcs)): its batches are
    /// then parsed without checking them again. Until then they are parsed
    /// with their CRCs checked.
    pub(super) crcs_checked: bool,
}

/// The offset after the last complete batch of a record set, and that
/// batch's partition leader epoch (-1 when it has none: magic 0 and 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BatchesEnd {
    pub(super) next_offset: i64,
    pub(super) leader_epoch: i32,
}

/// The decoder as configured, and one that leaves CRCs alone for sets
/// whose CRCs were checked already ([`Buffer::crcs_checked`]).
#[derive(Debug)]
pub(super) struct Decoders {
    pub(super) checking: RecordSetDecoder,
    pub(super) parsing: RecordSetDecoder,
}

impl Decoders {
    /// The decoders for record sets of at most `max_decompressed_bytes`
    /// once decompressed; the checking one checks CRCs if `check_crcs`.
    pub(super) fn new(max_decompressed_bytes: usize, check_crcs: bool) -> Self {
        let options = DecodeOptions::new().with_max_decompressed_bytes(max_decompressed_bytes);
        Decoders {
            checking: RecordSetDecoder::new(options.with_check_crcs(check_crcs)),
            parsing: RecordSetDecoder::new(options.with_check_crcs(false)),
        }
    }

    /// The one for a set whose CRCs were checked already, or not.
    pub(super) fn get(&self, crcs_checked: bool) -> &RecordSetDecoder {
        if crcs_checked {
            &self.parsing
        } else {
            &self.checking
        }
    }
}

/// Where the complete batches of `set` end, read off their headers alone
/// (nothing is decoded or checked: the decoder judges the batches when
/// their records are wanted). `None` when no batch is complete.
///
/// A v2 batch ends at `base_offset + last_offset_delta`; a magic 0 or 1
/// message (a compressed one is a wrapper) at its own offset.
pub(super) fn batches_end(set: &[u8]) -> Option<BatchesEnd> {
    let mut end = None;
    for (base, entry) in whole_entries(set) {
        let body = &set[entry.start + 12..entry.end];
        let (last, leader_epoch) = match body.get(4) {
            // v2: partition_leader_epoch(4) magic(1) crc(4) attributes(2)
            // last_offset_delta(4).
            Some(2) => {
                let Some(fields) = body.get(..15) else { break };
                let epoch = i32::from_be_bytes(fields[..4].try_into().expect("4 bytes"));
                let delta = i32::from_be_bytes(fields[11..15].try_into().expect("4 bytes"));
                (base.saturating_add(i64::from(delta)), epoch)
            }
            Some(0 | 1) => (base, -1),
            _ => break,
        };
        end = Some(BatchesEnd {
            next_offset: last.saturating_add(1),
            leader_epoch,
        });
    }
    end
}

/// The whole entries at the head of a record set (8-byte base offset,
/// 4-byte length, body), each as its base offset and its bytes' range in
/// `set`, until one is cut short or declares a negative length.
pub(super) fn whole_entries(
    set: &[u8],
) -> impl Iterator<Item = (i64, std::ops::Range<usize>)> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let head = set.get(at..at + 12)?;
        let base = i64::from_be_bytes(head[..8].try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| (at + 12).checked_add(l))
            .filter(|&end| end <= set.len())?;
        let entry = at..end;
        at = end;
        Some((base, entry))
    })
}

/// How much of a record set is decoded at a time: whole batches of at least
/// this many bytes as fetched (compressed). A response holds up to
/// `max.partition.fetch.bytes` per partition, and a compressed megabyte
/// can hold tens of megabytes of records: decoding all of it when it
/// arrives held them all in memory at once and delayed the first record.
pub(super) const DECODE_CHUNK: usize = 64 * 1024;

/// The next chunk of a partition's buffered record set, to decode outside
/// whatever guards the [`Fetcher`](super::Fetcher) ([`Fetcher::take_ready`](super::Fetcher::take_ready) hands it out,
/// [`Fetcher::put_decoded`](super::Fetcher::put_decoded) takes the result back): decompressing and
/// parsing records is the costly part of taking them, and the fetcher's
/// owner need not wait for it.
#[derive(Debug)]
pub struct DecodeJob {
    pub(super) tp: TopicPartition,
    pub(super) buffer: u64,
    pub(super) decoder: RecordSetDecoder,
    pub(super) isolation: IsolationLevel,
    pub(super) undecoded: Bytes,
    pub(super) from: i64,
    pub(super) floor: i64,
}

/// A decoded chunk, for [`Fetcher::put_decoded`](super::Fetcher::put_decoded).
#[derive(Debug)]
pub struct Decoded {
    pub(super) tp: TopicPartition,
    pub(super) buffer: u64,
    pub(super) records: Vec<OwnedRecord>,
    pub(super) next_offset: i64,
    pub(super) error: Option<FetchError>,
    pub(super) rest: Bytes,
}

impl DecodeJob {
    /// Decodes the records at or after the position the chunk was taken
    /// at (whole batches of at least 64 KiB as fetched, until one holds
    /// such a record or the set is used up).
    pub fn run(self) -> Decoded {
        let mut decoded = DecodedRecords::new();
        let mut rest = self.undecoded;
        let result = decode_some(
            &self.decoder,
            self.isolation,
            &[],
            &mut rest,
            self.from,
            &mut decoded,
        );
        let (records, next_offset, error) =
            records_from(&self.tp, &decoded, result, self.from, self.floor);
        Decoded {
            tp: self.tp,
            buffer: self.buffer,
            records,
            next_offset,
            error,
            rest,
        }
    }
}

/// The records of `decoded` at or after `from`, the offset after them (at
/// least `floor`, past any batch that held no record for us), and the
/// error of a decode that stopped there.
///
/// A batch may start before `from` (a compressed batch, a v0/v1 wrapper
/// message): its earlier records were delivered or skipped on purpose
/// already.
pub(super) fn records_from(
    tp: &TopicPartition,
    decoded: &DecodedRecords,
    result: Result<(), RecordsError>,
    from: i64,
    floor: i64,
) -> (Vec<OwnedRecord>, i64, Option<FetchError>) {
    let records: Vec<OwnedRecord> = decoded
        .iter()
        .filter(|r| r.offset() >= from)
        .map(|r| r.to_owned_record())
        .collect();
    let end = records
        .last()
        .map(|r| r.offset().saturating_add(1))
        .into_iter()
        .chain(decoded.next_offset)
        .fold(floor, i64::max);
    let error = result.err().map(|source| {
        log::warn!("corrupt records in {tp} at offset {end}: {source}");
        FetchError::CorruptRecords {
            partition: tp.clone(),
            offset: end,
            source,
        }
    });
    (records, end, error)
}

/// How many records a record set of at least [`DECODE_CHUNK`] bytes holds
/// for a position at `from`, read off the headers of its whole v2 batches,
/// when its first batch is sure to hold some (a v2 data batch, not a
/// control one, that ends at or after `from`): such a set is parsed only
/// as its records are taken, by the application's `poll`, not when it
/// comes (its CRCs are checked by [`Fetcher::check_pending_crcs`](super::Fetcher::check_pending_crcs), or as
/// it is parsed; a batch that turns out malformed stops the partition
/// there, after the records before it).
pub(super) fn records_ahead_of_decoding(set: &[u8], from: i64) -> Option<usize> {
    if set.len() < DECODE_CHUNK {
        return None;
    }
    let mut count = None;
    for (base, entry) in whole_entries(set) {
        // partition_leader_epoch(4) magic(1) crc(4) attributes(2)
        // last_offset_delta(4) base_timestamp(8) max_timestamp(8)
        // producer_id(8) producer_epoch(2) base_sequence(4) records(4).
        let Some(body) = set
            .get(entry.start + 12..entry.start + 12 + 49)
            .filter(|body| body[4] == 2)
        else {
            break;
        };
        let control = body[10] & 0x20 != 0;
        let delta = i32::from_be_bytes(body[11..15].try_into().expect("4 bytes"));
        let records = i32::from_be_bytes(body[45..49].try_into().expect("4 bytes"));
        if count.is_none()
            && (control || base.saturating_add(i64::from(delta)) < from || records <= 0)
        {
            return None;
        }
        let count = count.get_or_insert(0);
        if !control {
            *count += usize::try_from(records).unwrap_or(0);
        }
    }
    count
}

/// Whether every whole entry of `set` is a v2 batch whose CRC-32C holds.
/// A large set is checked by [`Fetcher::check_pending_crcs`](super::Fetcher::check_pending_crcs), on the
/// thread that read it, while its bytes are still in that core's cache;
/// checked later by `poll`, on another core, the same pass costs markedly
/// more (see docs/benchmarks.md).
pub(super) fn crcs_hold(set: &[u8]) -> bool {
    whole_entries(set).all(|(_, entry)| records::v2_crc_holds(&set[entry]))
}

/// Splits the first whole batches (entries of the record set: 8-byte
/// offset, 4-byte length, body) of at least [`DECODE_CHUNK`] bytes off
/// `rest`; everything when it cannot tell (a short or odd tail goes with
/// the last chunk, for the decoder to judge).
pub(super) fn split_chunk(rest: &mut Bytes) -> Bytes {
    let at = whole_entries(rest)
        .map(|(_, entry)| entry.end)
        .find(|&end| end >= DECODE_CHUNK);
    match at {
        Some(at) => rest.split_to(at),
        None => std::mem::take(rest),
    }
}

/// Decodes chunks of `rest` into `out` until one yields a record at or
/// after `from`, `rest` is used up, or a batch is faulty (then nothing more
/// is decoded: `rest` is emptied). With aborted transactions to filter the
/// whole set is decoded at once: the filter's state spans batches.
pub(super) fn decode_some(
    decoder: &RecordSetDecoder,
    isolation: IsolationLevel,
    aborted: &[records::AbortedTransaction],
    rest: &mut Bytes,
    from: i64,
    out: &mut DecodedRecords,
) -> Result<(), RecordsError> {
    if !aborted.is_empty() {
        return decoder.decode_into(std::mem::take(rest), isolation, aborted, out);
    }
    while !rest.is_empty() {
        let chunk = split_chunk(rest);
        if let Err(e) = decoder.decode_into(chunk, isolation, aborted, out) {
            *rest = Bytes::new();
            return Err(e);
        }
        if out.iter().any(|r| r.offset() >= from) {
            break;
        }
    }
    Ok(())
}

/// The largest `partition_max_bytes` this layer raises a partition's
/// limit to when a batch did not fit: below the default frame limit, so
/// the response can still be received.
pub(super) const MAX_PARTITION_OVERRIDE: usize = DEFAULT_MAX_FRAME_SIZE / 2;

/// A record set an answer brought, as far as it was read when it came.
#[derive(Debug)]
pub(super) struct Arrival {
    /// It, with the records decoded so far.
    pub(super) buffer: Buffer,
    /// How many records it holds for the position, when it was left
    /// undecoded to be parsed as they are taken (see
    /// [`records_ahead_of_decoding`]).
    pub(super) lazy: Option<usize>,
    /// How many records were decoded now.
    pub(super) decoded_now: usize,
    /// Whether a whole batch was decoded now.
    pub(super) whole_batch: bool,
    /// The incomplete batch the set ended with, when decoded now.
    pub(super) partial_tail: Option<PartialTail>,
}

impl Arrival {
    /// Whether it brings nothing to return: no record decoded, none left
    /// to decode lazily.
    pub(super) fn nothing_to_deliver(&self) -> bool {
        self.decoded_now == 0 && self.lazy.is_none()
    }

    /// How many records it buffers for the application.
    pub(super) fn records(&self) -> usize {
        self.lazy.unwrap_or(self.decoded_now)
    }
}

impl Buffer {
    /// Reads a record set fetched for `tp` from `from` into buffer `id`.
    ///
    /// A large set is parsed by whoever takes its records, not here: with
    /// records of kilobytes, checking and parsing them is most of the
    /// work a response brings. Its CRCs are checked by
    /// `Fetcher::check_pending_crcs`, which the driver calls once the
    /// next Fetch is on its way, while the bytes are still in this core's
    /// cache; until then, and for good if one fails, its batches are
    /// parsed with their CRCs checked (a faulty one is named when `poll`
    /// reaches it, after the records before it). Any other set is decoded
    /// now, up to its first records at or after `from` (all of it with
    /// `aborted` transactions to filter).
    pub(super) fn arrive(
        tp: &TopicPartition,
        id: u64,
        set: Bytes,
        aborted: &[records::AbortedTransaction],
        from: i64,
        decoding: (&RecordSetDecoder, IsolationLevel),
    ) -> Arrival {
        let end = batches_end(&set);
        let lazy = aborted
            .is_empty()
            .then(|| records_ahead_of_decoding(&set, from))
            .flatten();
        let mut decoded = DecodedRecords::new();
        let mut undecoded = set;
        let result = match lazy {
            Some(_) => Ok(()),
            None => {
                let (decoder, isolation) = decoding;
                decode_some(
                    decoder,
                    isolation,
                    aborted,
                    &mut undecoded,
                    from,
                    &mut decoded,
                )
            }
        };
        let (records, next_offset, error) = records_from(tp, &decoded, result, from, from);
        let decoded_now = records.len();
        Arrival {
            buffer: Buffer {
                id,
                decoding: false,
                records: records.into_iter(),
                next_offset,
                error,
                undecoded,
                from,
                end,
                ahead_sent: false,
                crcs_checked: false,
            },
            lazy,
            decoded_now,
            whole_batch: decoded.batches > 0,
            partial_tail: decoded.partial_tail,
        }
    }

    /// Whether every record is taken and nothing is left to decode (or a
    /// fault stopped the decoding).
    pub(super) fn used_up(&self) -> bool {
        self.records.len() == 0 && (self.error.is_some() || self.undecoded.is_empty())
    }
}

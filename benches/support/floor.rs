//! The floor a record decoder is measured against, shared by the
//! `records` and `compare` benches.

/// The floor: CRC-32C per batch, then every record's fields located.
/// Returns a sum so nothing is optimised away.
pub fn bare_parse_crc(set: &[u8]) -> usize {
    fn varint(b: &[u8], pos: &mut usize) -> i64 {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let byte = b[*pos];
            *pos += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return ((v >> 1) as i64) ^ -((v & 1) as i64);
            }
            shift += 7;
        }
    }
    let mut sum = 0;
    let mut pos = 0;
    while pos < set.len() {
        let len = i32::from_be_bytes(set[pos + 8..pos + 12].try_into().unwrap()) as usize;
        let batch = &set[pos..pos + 12 + len];
        let crc = u32::from_be_bytes(batch[17..21].try_into().unwrap());
        assert_eq!(crc32c::crc32c(&batch[21..]), crc);
        let count = i32::from_be_bytes(batch[57..61].try_into().unwrap());
        let mut p = 61;
        for _ in 0..count {
            let _len = varint(batch, &mut p);
            p += 1; // attributes
            let _ts = varint(batch, &mut p);
            let _off = varint(batch, &mut p);
            // A length of -1 is a null key or value.
            let k = varint(batch, &mut p).max(0) as usize;
            let key = &batch[p..p + k];
            p += k;
            let v = varint(batch, &mut p).max(0) as usize;
            let val = &batch[p..p + v];
            p += v;
            for _ in 0..varint(batch, &mut p) {
                let hk = varint(batch, &mut p) as usize;
                p += hk;
                let hv = varint(batch, &mut p) as usize;
                sum += batch[p..p + hv].len();
                p += hv;
            }
            sum += key.len() + val.len();
        }
        pos += 12 + len;
    }
    sum
}

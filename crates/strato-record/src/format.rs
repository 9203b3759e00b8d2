//! The byte layout of `*.strato` files (see `docs/recording-format.md`): magic, chunk framing,
//! record tags, varints and the CRC-32 that guards each chunk. Shared by the writer and the
//! decoder; nothing here touches files.

/// The first 8 bytes of every recording.
pub const MAGIC: &[u8; 8] = b"STRATREC";
/// The first 4 bytes of every chunk header.
pub const CHUNK_MAGIC: &[u8; 4] = b"CHNK";
/// Chunk header length: magic, payload length, CRC-32, version, reserved.
pub const CHUNK_HEADER_LEN: usize = 16;
/// The format version written in chunk headers.
pub const VERSION: u16 = 1;

pub(crate) mod tag {
    pub const PROCESS: u8 = 0x01;
    pub const STRING: u8 = 0x02;
    pub const THREAD_TRACK: u8 = 0x03;
    pub const QUEUE_TRACK: u8 = 0x04;
    pub const COUNTER_TRACK: u8 = 0x05;
    pub const PROCESS_NAME: u8 = 0x06;
    pub const TRACK_NAME: u8 = 0x07;
    pub const METADATA: u8 = 0x08;
    pub const CLOCK: u8 = 0x09;
    pub const DEVICE: u8 = 0x0A;
    pub const BEGIN: u8 = 0x10;
    pub const END: u8 = 0x11;
    pub const SPAN: u8 = 0x12;
    pub const INSTANT: u8 = 0x13;
    pub const COUNTER: u8 = 0x14;
    pub const UNTRACED: u8 = 0x15;
    pub const START: u8 = 0x16;
    pub const STOP: u8 = 0x17;
}

pub(crate) const FLAG_CORR: u8 = 1;
pub(crate) const FLAG_ARGS: u8 = 2;

/// CRC-32/IEEE (the zlib one), table-driven.
pub fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc = TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc ^ 0xFFFF_FFFF
}

/// Appends records to a chunk payload, keeping the running timestamp for deltas.
#[derive(Debug, Default)]
pub(crate) struct Enc {
    pub buf: Vec<u8>,
    last_ts: i64,
}

impl Enc {
    pub fn uv(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7F) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(byte);
                return;
            }
            self.buf.push(byte | 0x80);
        }
    }
    pub fn sv(&mut self, v: i64) {
        self.uv(((v << 1) ^ (v >> 63)) as u64);
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn text(&mut self, s: &str) {
        self.uv(s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
    }
    pub fn ts(&mut self, ts: i64) {
        self.sv(ts.wrapping_sub(self.last_ts));
        self.last_ts = ts;
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn reset(&mut self) {
        self.buf.clear();
        self.last_ts = 0;
    }
}

/// Frames `payload` as one chunk (header + payload).
pub(crate) fn frame(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(CHUNK_MAGIC);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32(payload).to_le_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(payload);
}

/// Reads records of one chunk payload.
#[derive(Debug)]
pub(crate) struct Dec<'a> {
    bytes: &'a [u8],
    pos: usize,
    last_ts: i64,
}

/// A malformed record inside a chunk whose checksum matched (a writer bug, not a torn file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed record at byte {0} of a chunk")]
pub struct Malformed(pub usize);

impl<'a> Dec<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Dec {
            bytes,
            pos: 0,
            last_ts: 0,
        }
    }
    pub fn done(&self) -> bool {
        self.pos >= self.bytes.len()
    }
    fn err(&self) -> Malformed {
        Malformed(self.pos)
    }
    pub fn u8(&mut self) -> Result<u8, Malformed> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.err())?;
        self.pos += 1;
        Ok(b)
    }
    pub fn uv(&mut self) -> Result<u64, Malformed> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.u8()?;
            if shift >= 64 {
                return Err(self.err());
            }
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }
    pub fn u32(&mut self) -> Result<u32, Malformed> {
        u32::try_from(self.uv()?).map_err(|_| self.err())
    }
    pub fn sv(&mut self) -> Result<i64, Malformed> {
        let u = self.uv()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }
    pub fn f64(&mut self) -> Result<f64, Malformed> {
        let end = self.pos + 8;
        let slice = self.bytes.get(self.pos..end).ok_or_else(|| self.err())?;
        let mut arr = [0u8; 8];
        arr.copy_from_slice(slice);
        self.pos = end;
        Ok(f64::from_le_bytes(arr))
    }
    pub fn text(&mut self) -> Result<String, Malformed> {
        let len = usize::try_from(self.uv()?).map_err(|_| self.err())?;
        let end = self.pos.checked_add(len).ok_or_else(|| self.err())?;
        let slice = self.bytes.get(self.pos..end).ok_or_else(|| self.err())?;
        let text = std::str::from_utf8(slice).map_err(|_| self.err())?;
        self.pos = end;
        Ok(text.to_owned())
    }
    pub fn ts(&mut self) -> Result<i64, Malformed> {
        let d = self.sv()?;
        self.last_ts = self.last_ts.wrapping_add(d);
        Ok(self.last_ts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_zlib() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn varints_round_trip() {
        let mut e = Enc::default();
        let values = [0i64, 1, -1, 63, -64, 1 << 40, i64::MIN, i64::MAX];
        for v in values {
            e.sv(v);
        }
        e.uv(u64::MAX);
        let mut d = Dec::new(&e.buf);
        for v in values {
            assert_eq!(d.sv().unwrap(), v);
        }
        assert_eq!(d.uv().unwrap(), u64::MAX);
        assert!(d.done());
    }
}

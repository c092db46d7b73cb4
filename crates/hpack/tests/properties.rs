//! Property tests (a bounded number of cases per run): what the encoder
//! writes decodes to what it was given; blocks written by a model encoder
//! that uses the dynamic table (additions, references, evictions, size
//! updates) decode to the model's fields; and no input, however
//! malformed, panics the decoder.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use std::collections::VecDeque;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn decode(d: &mut hpack::Decoder, block: &[u8]) -> Result<Fields, hpack::DecodeError> {
    let mut out = Vec::new();
    d.decode(block, |f| out.push((f.name.to_vec(), f.value.to_vec())))?;
    Ok(out)
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec![
            b"content-type".to_vec(),
            b"etag".to_vec(),
            b"x-custom".to_vec(),
            b"set-cookie".to_vec(),
            b"date".to_vec(),
        ]),
        "[a-z0-9-]{1,40}".prop_map(String::into_bytes),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[ -~]{0,80}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..300),
    ]
}

/// A minimal encoder with a dynamic table, the model the decoder must
/// agree with: each step adds a literal to the table, refers to an entry
/// or its name, sends a literal not indexed, or resizes the table.
#[derive(Debug, Clone)]
enum Step {
    Add(Vec<u8>, Vec<u8>),
    Refer(usize),
    ReferName(usize, Vec<u8>),
    Plain(Vec<u8>, Vec<u8>),
    Resize(usize),
    /// The index one past the table: the decoder must refuse it, which
    /// ends the connection (and the sequence).
    Beyond,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (name(), value()).prop_map(|(n, v)| Step::Add(n, v)),
        4 => any::<usize>().prop_map(Step::Refer),
        2 => (any::<usize>(), value()).prop_map(|(i, v)| Step::ReferName(i, v)),
        2 => (name(), value()).prop_map(|(n, v)| Step::Plain(n, v)),
        1 => prop_oneof![0usize..=400, 0usize..=4096].prop_map(Step::Resize),
        1 => Just(Step::Beyond),
    ]
}

fn int(value: usize, n: u32, flags: u8, out: &mut Vec<u8>) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push(0x80 | (rest % 128) as u8);
        rest /= 128;
    }
    out.push(rest as u8);
}

fn raw_string(s: &[u8], out: &mut Vec<u8>) {
    int(s.len(), 7, 0, out);
    out.extend_from_slice(s);
}

struct Model {
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    max: usize,
}

impl Model {
    fn size(&self) -> usize {
        self.table.iter().map(|(n, v)| n.len() + v.len() + 32).sum()
    }

    fn evict(&mut self, bound: usize) {
        while self.size() > bound {
            self.table.pop_back();
        }
    }

    /// Writes the steps as blocks (a resize starts a new block) and
    /// returns them with the fields each must decode to; `None` for a
    /// block the decoder must refuse, the last.
    fn write(&mut self, steps: &[Step]) -> Vec<(Vec<u8>, Option<Fields>)> {
        let mut blocks = self
            .write_fields(steps)
            .into_iter()
            .map(|(b, f)| (b, Some(f)))
            .collect::<Vec<_>>();
        if let Some(Step::Beyond) = steps.iter().find(|s| matches!(s, Step::Beyond)) {
            blocks.last_mut().unwrap().1 = None;
        }
        blocks
    }

    fn write_fields(&mut self, steps: &[Step]) -> Vec<(Vec<u8>, Fields)> {
        let mut blocks = vec![(Vec::new(), Vec::new())];
        for s in steps {
            match s {
                Step::Beyond => {
                    let (b, _) = blocks.last_mut().unwrap();
                    int(62 + self.table.len(), 7, 0x80, b);
                    break;
                }
                Step::Resize(size) => {
                    let mut b = Vec::new();
                    int(*size, 5, 0x20, &mut b);
                    self.max = *size;
                    self.evict(*size);
                    blocks.push((b, Vec::new()));
                }
                Step::Add(n, v) => {
                    let (b, f) = blocks.last_mut().unwrap();
                    b.push(0x40);
                    raw_string(n, b);
                    raw_string(v, b);
                    f.push((n.clone(), v.clone()));
                    let size = n.len() + v.len() + 32;
                    self.evict(self.max.saturating_sub(size));
                    if size <= self.max {
                        self.table.push_front((n.clone(), v.clone()));
                    }
                }
                Step::Refer(i) if !self.table.is_empty() => {
                    let i = i % self.table.len();
                    let (b, f) = blocks.last_mut().unwrap();
                    int(62 + i, 7, 0x80, b);
                    f.push(self.table[i].clone());
                }
                Step::ReferName(i, v) if !self.table.is_empty() => {
                    let i = i % self.table.len();
                    let (b, f) = blocks.last_mut().unwrap();
                    int(62 + i, 4, 0x00, b);
                    raw_string(v, b);
                    f.push((self.table[i].0.clone(), v.clone()));
                }
                Step::Refer(_) | Step::ReferName(..) => {}
                Step::Plain(n, v) => {
                    let (b, f) = blocks.last_mut().unwrap();
                    b.push(0x00);
                    raw_string(n, b);
                    raw_string(v, b);
                    f.push((n.clone(), v.clone()));
                }
            }
        }
        blocks
    }
}

/// Cases per property: 512 in the normal run, `FUZZ_CASES` in a longer
/// one (`scripts/fuzz.sh`).
fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

proptest! {
    // Failures are kept by hand as tests, not in a side file.
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..ProptestConfig::default()
    })]

    #[test]
    fn what_the_encoder_writes_decodes_back(
        status in 100u16..=999,
        fields in prop::collection::vec((name(), value()), 0..12),
        blocks in 1usize..4,
    ) {
        let mut enc = hpack::Encoder::new();
        let mut dec = hpack::Decoder::new(4096);
        for _ in 0..blocks {
            let mut out = Vec::new();
            let mut block = enc.block(&mut out);
            block.status(status);
            for (n, v) in &fields {
                block.field(n, v);
            }
            let got = decode(&mut dec, &out).unwrap();
            prop_assert_eq!(&got[0], &(b":status".to_vec(), status.to_string().into_bytes()));
            prop_assert_eq!(&got[1..], &fields[..]);
        }
    }

    /// Repeating fields through the encoder's table, the peer's limit
    /// changing between blocks: the decoder, told the same limits (and
    /// so demanding the size updates RFC 7541 4.2 requires), decodes
    /// every block to what was encoded.
    #[test]
    fn the_encoders_table_stays_in_step_with_the_decoders(
        blocks in prop::collection::vec(
            (
                prop::option::of(prop_oneof![0usize..300, 0usize..=8192]),
                prop::collection::vec((any::<bool>(), 0usize..40, value()), 0..12),
            ),
            1..30,
        ),
    ) {
        let names: Vec<Vec<u8>> = (0..40).map(|i| format!("x-field-{}", i % 20).into_bytes()).collect();
        let mut enc = hpack::Encoder::new();
        let mut dec = hpack::Decoder::new(4096);
        for (limit, fields) in &blocks {
            if let Some(limit) = *limit {
                enc.set_peer_limit(limit);
                dec.set_limit(limit.min(4096));
            }
            let mut out = Vec::new();
            let mut block = enc.block(&mut out);
            let mut want = Vec::new();
            for (repeat, n, v) in fields {
                // Repeating fields draw from few values, so they do repeat.
                let v = if *repeat { v[..v.len().min(2)].to_vec() } else { v.clone() };
                if *repeat {
                    block.indexed(&names[*n], &v);
                } else {
                    block.field(&names[*n], &v);
                }
                want.push((names[*n].clone(), v));
            }
            prop_assert_eq!(decode(&mut dec, &out).unwrap(), want);
        }
    }

    #[test]
    fn blocks_that_use_the_table_decode_as_the_model_says(
        steps in prop::collection::vec(step(), 0..60),
    ) {
        let mut model = Model { table: VecDeque::new(), max: 4096 };
        let mut dec = hpack::Decoder::new(4096);
        for (block, fields) in model.write(&steps) {
            match fields {
                Some(fields) => prop_assert_eq!(decode(&mut dec, &block).unwrap(), fields),
                None => prop_assert_eq!(
                    decode(&mut dec, &block),
                    Err(hpack::DecodeError::InvalidIndex)
                ),
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        blocks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..6),
        limit in 0usize..=4096,
    ) {
        let mut dec = hpack::Decoder::new(limit);
        for b in &blocks {
            let _ = dec.decode(b, |_| {});
        }
    }

    /// Valid blocks with bytes flipped, cut or added: the decoder either
    /// decodes or says why, never panics.
    #[test]
    fn damaged_blocks_never_panic(
        steps in prop::collection::vec(step(), 1..30),
        damage in prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let mut model = Model { table: VecDeque::new(), max: 4096 };
        let mut dec = hpack::Decoder::new(4096);
        for (mut block, _) in model.write(&steps) {
            for &(at, byte, how) in &damage {
                if block.is_empty() {
                    block.push(byte);
                    continue;
                }
                let at = at % block.len();
                match how {
                    0 => block[at] ^= byte,
                    1 => block.truncate(at),
                    _ => block.insert(at, byte),
                }
            }
            let _ = dec.decode(&block, |_| {});
        }
    }
}

//! Property tests (a bounded number of cases per run; `FUZZ_CASES` for
//! more, `scripts/fuzz.sh`): whatever frames a client sends, in whatever
//! pieces, the connection never panics, answers what it hands out within
//! the windows it reports, and writes at most a bounded multiple of what
//! it read (no amplification a client could pump).

mod support;

use h2wire::{Config, Connection, Event};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use support::*;

fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

/// Frames a client could send, right and wrong: every type, small
/// stream numbers (so they hit live streams), random flags and payloads,
/// and well-formed request heads often.
fn client_frame() -> impl Strategy<Value = Vec<u8>> {
    let stream = prop_oneof![Just(0u32), 1u32..12, any::<u32>()];
    prop_oneof![
        3 => (stream.clone(), any::<bool>(), "/[a-z]{0,8}").prop_map(|(s, end, p)| get(s | 1, &p, end)),
        2 => (0u8..12, any::<u8>(), stream, prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(k, f, s, p)| frame(k, f, s, &p)),
        1 => (1u32..12, 0u32..70000).prop_map(|(s, n)| frame(WINDOW_UPDATE, 0, s, &n.to_be_bytes())),
        1 => (any::<u16>(), any::<u32>()).prop_map(|(id, v)| {
            let mut p = id.to_be_bytes().to_vec();
            p.extend_from_slice(&v.to_be_bytes());
            frame(SETTINGS, 0, 0, &p)
        }),
        1 => (1u32..12, prop::collection::vec(any::<u8>(), 0..100))
            .prop_map(|(s, p)| frame(DATA, 0, s | 1, &p)),
    ]
}

/// Runs `input` (after the handshake) through a connection in `cuts`-sized
/// pieces, answering every request at once with `body`.
fn run(input: &[u8], cut: usize, body: &[u8]) -> (usize, usize) {
    let mut c = Connection::new(
        Config {
            max_concurrent_streams: 4,
            control_frame_budget: 50,
            max_local_error_resets: 20,
            ..Config::default()
        },
        t0(),
    );
    let mut all = hello();
    all.extend_from_slice(input);
    let mut written = 0;
    let mut open: Vec<u32> = Vec::new();
    for piece in all.chunks(cut.max(1)) {
        let failed = c.receive(piece, t0()).is_err();
        while let Some(ev) = c.next_event() {
            match ev {
                Event::Request(r) => {
                    let id = r.stream();
                    // False when a later frame in the same read already
                    // reset it (its Reset event follows).
                    if c.send_headers(id, false, |b| {
                        b.status(200);
                    }) {
                        open.push(id);
                    }
                    c.recycle(r);
                }
                Event::Reset(id) => open.retain(|&s| s != id),
            }
        }
        open.retain(|&id| {
            let n = c.window(id).min(body.len()).min(c.max_frame());
            if n < body.len() && c.window(id) == 0 {
                return true;
            }
            c.send_data(id, &body[..n], true);
            false
        });
        written += std::mem::take(c.output()).len();
        if failed {
            assert!(c.is_done());
            break;
        }
    }
    (all.len(), written)
}

proptest! {
    // Failures are kept by hand as tests, not in a side file.
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..ProptestConfig::default()
    })]

    #[test]
    fn frames_in_any_pieces_never_panic_and_never_amplify(
        frames in prop::collection::vec(client_frame(), 0..60),
        cut in 1usize..64,
    ) {
        let input: Vec<u8> = frames.concat();
        let (read, written) = run(&input, cut, b"0123456789");
        // Per frame read (9 octets at least) at most one answer (a head of
        // a few octets and 10 of body, a RST, a PING ACK or a
        // WINDOW_UPDATE), plus the SETTINGS, ACK and GOAWAY.
        prop_assert!(written <= 8 * read + 200, "{written} written for {read} read");
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        run(&bytes, 7, b"x");
    }
}

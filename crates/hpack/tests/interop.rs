//! Both directions against an independent HPACK: Python's `hpack`
//! (Debian's python3-hpack, which python3-h2 brings; installed by
//! scripts/install-deps.sh). Python encodes request heads as a browser's
//! would reach a server (Huffman, the dynamic table, a table size change
//! mid-connection) and this crate decodes them; this crate encodes
//! response heads and Python decodes them.

use std::io::Write as _;
use std::process::{Command, Stdio};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Runs `script` under Debian's python3 with `input` on stdin.
fn python(script: &str, input: &str) -> String {
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("/usr/bin/python3 (scripts/install-deps.sh installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python3 with hpack (python3-hpack): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// One line per block: `name:value` pairs in hex, space-separated; a line
/// `size N` changes the encoder's table size before the next block.
fn lines(blocks: &[Fields]) -> String {
    let mut s = String::new();
    for (i, fields) in blocks.iter().enumerate() {
        if i == 3 {
            s.push_str("size 256\n");
        }
        let pairs: Vec<String> = fields
            .iter()
            .map(|(n, v)| format!("{}:{}", hex(n), hex(v)))
            .collect();
        s.push_str(&pairs.join(" "));
        s.push('\n');
    }
    s
}

fn request(path: &str, cookie: &str) -> Fields {
    [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "www.example.com:8443"),
        (":path", path),
        ("sec-ch-ua", "\"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\""),
        ("user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
        ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"),
        ("accept-encoding", "gzip, deflate, br, zstd"),
        ("accept-language", "en-US,en;q=0.9"),
        ("if-none-match", "\"400-6553f100\""),
        ("cookie", cookie),
    ]
    .iter()
    .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect()
}

#[test]
fn python_encoded_requests_decode() {
    let mut blocks: Vec<Fields> = (0..8)
        .map(|i| {
            request(
                &format!("/static/app-{i}.js?v=%E2%9C%93"),
                &format!("session={}", "x".repeat(i * 40)),
            )
        })
        .collect();
    // Octets no text encoding would produce, in a value.
    blocks[5].push((b"x-bytes".to_vec(), (0u8..=255).collect()));
    let script = r#"
import sys
from hpack import Encoder
e = Encoder()
for line in sys.stdin.read().splitlines():
    if line.startswith('size '):
        e.header_table_size = int(line[5:])
        continue
    fields = [tuple(bytes.fromhex(x) for x in p.split(':')) for p in line.split()]
    print(e.encode(fields, huffman=True).hex())
"#;
    let out = python(script, &lines(&blocks));
    let mut d = hpack::Decoder::new(4096);
    let encoded: Vec<&str> = out.lines().collect();
    assert_eq!(encoded.len(), blocks.len());
    for (block, want) in encoded.iter().zip(&blocks) {
        let mut got = Vec::new();
        d.decode(&unhex(block), |f| {
            got.push((f.name.to_vec(), f.value.to_vec()))
        })
        .unwrap();
        assert_eq!(&got, want);
    }
}

#[test]
fn responses_decode_in_python() {
    let mut enc = hpack::Encoder::new();
    let statuses = [200u16, 304, 206, 404, 416, 301, 500, 418];
    let mut blocks = Vec::new();
    let mut want: Vec<Fields> = Vec::new();
    for (i, status) in statuses.iter().enumerate() {
        // Repeating fields through the encoder's table (the date changes
        // every third response).
        let indexed: Fields = vec![
            (b"server".to_vec(), b"fileserver".to_vec()),
            (
                b"date".to_vec(),
                format!("Tue, 14 Nov 2023 22:13:{:02} GMT", i / 3).into_bytes(),
            ),
            (b"cache-control".to_vec(), b"no-cache".to_vec()),
        ];
        let fields: Fields = vec![
            (
                b"content-type".to_vec(),
                b"text/html; charset=utf-8".to_vec(),
            ),
            (
                b"content-length".to_vec(),
                (1000 * i).to_string().into_bytes(),
            ),
            (b"etag".to_vec(), format!("\"{i:x}-6553f100\"").into_bytes()),
            (
                b"last-modified".to_vec(),
                b"Tue, 14 Nov 2023 22:13:20 GMT".to_vec(),
            ),
            (b"x-frame-options".to_vec(), b"DENY".to_vec()),
            (b"x-bytes".to_vec(), (128u8..=255).collect()),
        ];
        let mut out = Vec::new();
        let mut block = enc.block(&mut out);
        block.status(*status);
        for (n, v) in &indexed {
            block.indexed(n, v);
        }
        for (n, v) in &fields {
            block.field(n, v);
        }
        block.never_indexed(b"set-cookie", b"id=secret");
        blocks.push(hex(&out));
        let mut all = vec![(b":status".to_vec(), status.to_string().into_bytes())];
        all.extend(indexed);
        all.extend(fields);
        all.push((b"set-cookie".to_vec(), b"id=secret".to_vec()));
        want.push(all);
    }
    let script = r#"
import sys
from hpack import Decoder
d = Decoder()
for line in sys.stdin.read().splitlines():
    fields = d.decode(bytes.fromhex(line), raw=True)
    print(' '.join(n.hex() + ':' + v.hex() for n, v in fields))
"#;
    let out = python(script, &(blocks.join("\n") + "\n"));
    let got: Vec<Fields> = out
        .lines()
        .map(|l| {
            l.split(' ')
                .map(|p| {
                    let (n, v) = p.split_once(':').unwrap();
                    (unhex(n), unhex(v))
                })
                .collect()
        })
        .collect();
    assert_eq!(got, want);
}

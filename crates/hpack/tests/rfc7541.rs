//! RFC 7541 Appendix C: each example's header blocks, decoded in order on
//! one decoder (so the dynamic table's additions and evictions between
//! them count), against the header lists the RFC gives.

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn decode_all(limit: usize, blocks: &[&str]) -> Vec<Vec<(String, String)>> {
    let mut d = hpack::Decoder::new(limit);
    blocks
        .iter()
        .map(|b| {
            let mut fields = Vec::new();
            d.decode(&hex(b), |f| {
                fields.push((
                    String::from_utf8(f.name.to_vec()).unwrap(),
                    String::from_utf8(f.value.to_vec()).unwrap(),
                ))
            })
            .unwrap();
            fields
        })
        .collect()
}

fn list(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn requests() -> Vec<Vec<(String, String)>> {
    let first = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
    ];
    let mut second = first.to_vec();
    second.push(("cache-control", "no-cache"));
    vec![
        list(&first),
        list(&second),
        list(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ]),
    ]
}

fn responses() -> Vec<Vec<(String, String)>> {
    let first = [
        (":status", "302"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com"),
    ];
    let mut second = first.to_vec();
    second[0].1 = "307";
    vec![
        list(&first),
        list(&second),
        list(&[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ("location", "https://www.example.com"),
            ("content-encoding", "gzip"),
            (
                "set-cookie",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ),
        ]),
    ]
}

#[test]
fn c3_requests_without_huffman() {
    let blocks = [
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ];
    assert_eq!(decode_all(4096, &blocks), requests());
}

#[test]
fn c4_requests_with_huffman() {
    let blocks = [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ];
    assert_eq!(decode_all(4096, &blocks), requests());
}

/// C.5 and C.6 run with a 256-octet table, so the later responses evict.
#[test]
fn c5_responses_without_huffman() {
    let blocks = [
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
         3d31",
    ];
    assert_eq!(decode_all(256, &blocks), responses());
}

#[test]
fn c6_responses_with_huffman() {
    let blocks = [
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ];
    assert_eq!(decode_all(256, &blocks), responses());
}

/// The same C.6 blocks with a table too small for what they index: the
/// later references fall outside it.
#[test]
fn c6_with_a_smaller_table_fails_at_the_first_evicted_reference() {
    let mut d = hpack::Decoder::new(100);
    let first = hex(
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    );
    d.decode(&first, |_| {}).unwrap();
    assert_eq!(
        d.decode(&hex("4883 640e ffc1 c0bf"), |_| {}),
        Err(hpack::DecodeError::InvalidIndex)
    );
}

//! Status codes: the pre-rendered HTTP/1.1 status lines and the reason
//! phrases error bodies carry, from one table.

macro_rules! statuses {
    ($($code:literal $reason:literal,)*) => {
        /// The status line (with CRLF) for a code; unknown codes become 500.
        pub fn status_line(code: u16) -> &'static [u8] {
            match code {
                $($code => concat!("HTTP/1.1 ", $code, " ", $reason, "\r\n").as_bytes(),)*
                _ => b"HTTP/1.1 500 Internal Server Error\r\n",
            }
        }

        /// Short reason text used as the body of error responses.
        pub fn reason(code: u16) -> &'static str {
            match code {
                $($code => $reason,)*
                _ => "Internal Server Error",
            }
        }

        /// Every code with its own status line, ascending: what a response
        /// can carry (any other code goes out as 500). A metric labelled
        /// by code takes its label values from here.
        pub const CODES: &[u16] = &[$($code,)*];

        /// `code` in digits, for a label; `None` for a code not in
        /// [`CODES`].
        pub fn digits(code: u16) -> Option<&'static str> {
            match code {
                $($code => Some(stringify!($code)),)*
                _ => None,
            }
        }
    };
}

statuses! {
    200 "OK",
    204 "No Content",
    206 "Partial Content",
    301 "Moved Permanently",
    302 "Found",
    303 "See Other",
    304 "Not Modified",
    307 "Temporary Redirect",
    308 "Permanent Redirect",
    400 "Bad Request",
    401 "Unauthorized",
    403 "Forbidden",
    404 "Not Found",
    405 "Method Not Allowed",
    408 "Request Timeout",
    412 "Precondition Failed",
    414 "URI Too Long",
    416 "Range Not Satisfiable",
    429 "Too Many Requests",
    431 "Request Header Fields Too Large",
    500 "Internal Server Error",
    503 "Service Unavailable",
}

#[cfg(test)]
mod tests {
    #[test]
    fn lines_and_reasons_agree() {
        assert_eq!(super::status_line(401), b"HTTP/1.1 401 Unauthorized\r\n");
        assert_eq!(
            super::status_line(599),
            b"HTTP/1.1 500 Internal Server Error\r\n"
        );
        assert_eq!(super::reason(308), "Permanent Redirect");
        assert_eq!(
            super::status_line(429),
            b"HTTP/1.1 429 Too Many Requests\r\n"
        );
    }

    #[test]
    fn codes_ascend_and_each_has_its_line_and_digits() {
        assert!(super::CODES.windows(2).all(|w| w[0] < w[1]));
        for &code in super::CODES {
            let digits = super::digits(code).unwrap();
            assert_eq!(digits, code.to_string());
            let line = super::status_line(code);
            assert!(line.starts_with(format!("HTTP/1.1 {digits} ").as_bytes()));
        }
        assert_eq!(super::digits(599), None);
    }
}

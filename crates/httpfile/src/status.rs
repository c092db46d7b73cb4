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
    416 "Range Not Satisfiable",
    431 "Request Header Fields Too Large",
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
    }
}

//! IMF-fixdate formatting without allocation, and a per-thread `Date` cache
//! that re-renders at most once per second.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub const HTTP_DATE_LEN: usize = 29;

/// Formats Unix seconds as an IMF-fixdate.
pub fn fmt_http_date(secs: u64, out: &mut [u8; HTTP_DATE_LEN]) {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86400;
    let rem = secs % 86400;
    let (h, m, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    let (y, mo, d) = civil_from_days(days as i64);
    let y = y.clamp(0, 9999) as u64;
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    out[3..5].copy_from_slice(b", ");
    two(&mut out[5..7], u64::from(d));
    out[7] = b' ';
    out[8..11].copy_from_slice(MONTHS[(mo - 1) as usize]);
    out[11] = b' ';
    two(&mut out[12..14], y / 100);
    two(&mut out[14..16], y % 100);
    out[16] = b' ';
    two(&mut out[17..19], h);
    out[19] = b':';
    two(&mut out[20..22], m);
    out[22] = b':';
    two(&mut out[23..25], s);
    out[25..29].copy_from_slice(b" GMT");
}

/// (year, month 1-12, day 1-31) of a count of days since 1970-01-01
/// (Howard Hinnant's civil-from-days, exact for every `i64` day we can meet).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

fn two(out: &mut [u8], v: u64) {
    out[0] = b'0' + (v / 10 % 10) as u8;
    out[1] = b'0' + (v % 10) as u8;
}

struct DateCache {
    secs: u64,
    text: [u8; HTTP_DATE_LEN],
}

thread_local! {
    static DATE: RefCell<DateCache> = const { RefCell::new(DateCache { secs: u64::MAX, text: [0; HTTP_DATE_LEN] }) };
    static FIELD_DATE: RefCell<DateCache> = const { RefCell::new(DateCache { secs: u64::MAX, text: [0; HTTP_DATE_LEN] }) };
}

/// Appends the IMF-fixdate of `secs`, the value of a date field other than
/// `Date` (`Last-Modified` above all). The thread's last one is kept: the
/// files of a site mostly share a few modification seconds (those of its
/// deploys), so most responses repeat it, and formatting one was ~190 of
/// a range response's ~10300 instructions.
pub fn push_http_date(out: &mut Vec<u8>, secs: u64) {
    FIELD_DATE.with(|c| {
        let mut c = c.borrow_mut();
        if c.secs != secs {
            c.secs = secs;
            fmt_http_date(secs, &mut c.text);
        }
        out.extend_from_slice(&c.text);
    })
}

/// Current Unix seconds.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Calls `f` with the current second and its rendered `Date` value,
/// re-rendering only when the second changed.
pub fn with_now<R>(f: impl FnOnce(u64, &[u8; HTTP_DATE_LEN]) -> R) -> R {
    with_date(now_secs(), f)
}

/// [`with_now`] for a second the caller already read (the time a response
/// was decided at), without reading the clock again.
pub fn with_date<R>(now: u64, f: impl FnOnce(u64, &[u8; HTTP_DATE_LEN]) -> R) -> R {
    DATE.with(|c| {
        let mut c = c.borrow_mut();
        if c.secs != now {
            c.secs = now;
            fmt_http_date(now, &mut c.text);
        }
        f(now, &c.text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_httpdate() {
        for secs in [
            0u64,
            784_111_777,
            951_782_400,
            1_700_000_000,
            4_102_444_799,
            253_402_300_799,
        ] {
            let mut b = [0; HTTP_DATE_LEN];
            fmt_http_date(secs, &mut b);
            let expect = httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(secs));
            assert_eq!(std::str::from_utf8(&b).unwrap(), expect);
        }
    }

    #[test]
    fn a_field_date_follows_its_seconds_whatever_came_before() {
        let mut out = Vec::new();
        for secs in [1_700_000_000u64, 1_700_000_000, 0, 1_700_000_001, 0] {
            out.clear();
            push_http_date(&mut out, secs);
            let expect = httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(secs));
            assert_eq!(std::str::from_utf8(&out).unwrap(), expect);
        }
    }
}

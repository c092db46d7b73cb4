//! Criterion measurement by the benchmark thread's CPU time, shared by the
//! bench targets (`#[path = "support/cpu_time.rs"] mod cpu_time;`).
//!
//! On the shared 2-core build machine other jobs preempt the benchmark
//! thread; wall time then counts the time spent descheduled and ratios drift
//! with the load, CPU time (`CLOCK_THREAD_CPUTIME_ID`) does not.

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::Throughput;

/// The calling thread's CPU time in nanoseconds (user + system).
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid clock id and out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Criterion measurement: CPU time of the benchmark thread.
pub(crate) struct ThreadCpuTime;

struct NanosFormatter;

impl ValueFormatter for NanosFormatter {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "ns (cpu)"
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let per = match throughput {
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Elements(n) => {
                *n as f64
            }
        };
        for value in values {
            *value = per * 1e9 / *value;
        }
        "per cpu-second"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }

    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns() - start
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &NanosFormatter
    }
}

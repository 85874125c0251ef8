//! The rows of the CSV files a run writes, as typed structs: the writers (`output.rs`) and the
//! readers (the HTML report) share them, so a renamed or retyped column changes both at once or
//! fails to compile. The csv crate writes and reads them; the number formats are the types'.

use std::io::Write;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use servesim_sim::SimTime;

/// A float written with `D` decimals (`{:.D}`), read back as a plain float.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Fixed<const D: usize>(pub f64);

impl<const D: usize> Serialize for Fixed<D> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:.*}", D, self.0))
    }
}

impl<'de, const D: usize> Deserialize<'de> for Fixed<D> {
    fn deserialize<De: Deserializer<'de>>(d: De) -> Result<Self, De::Error> {
        f64::deserialize(d).map(Fixed)
    }
}

/// Milliseconds written exactly from integer nanoseconds (`12.345678`, always six decimals, so
/// outputs are byte-identical across runs and platforms), read back exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ms(pub SimTime);

impl Ms {
    /// The value in ms as the nearest float (the same float as parsing the written text).
    pub(crate) fn as_f64(self) -> f64 {
        self.0 .0 as f64 / 1e6
    }
}

impl std::fmt::Display for Ms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:06}", self.0 .0 / 1_000_000, self.0 .0 % 1_000_000)
    }
}

impl Serialize for Ms {
    /// The `Display` text, built in a stack buffer (no formatter, no allocation: a run writes
    /// several per request).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 32];
        let mut i = buf.len();
        let (mut int, mut frac) = (self.0 .0 / 1_000_000, self.0 .0 % 1_000_000);
        for _ in 0..6 {
            i -= 1;
            buf[i] = b'0' + (frac % 10) as u8;
            frac /= 10;
        }
        i -= 1;
        buf[i] = b'.';
        loop {
            i -= 1;
            buf[i] = b'0' + (int % 10) as u8;
            int /= 10;
            if int == 0 {
                break;
            }
        }
        s.serialize_str(std::str::from_utf8(&buf[i..]).expect("ASCII digits"))
    }
}

impl<'de> Deserialize<'de> for Ms {
    fn deserialize<De: Deserializer<'de>>(d: De) -> Result<Self, De::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Ms;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("milliseconds with at most six decimals, such as 12.345678")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Ms, E> {
                parse_ms(v).map(|ns| Ms(SimTime(ns))).ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
            }
        }
        d.deserialize_str(V)
    }
}

fn parse_ms(v: &str) -> Option<u64> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    let digit = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || frac.len() > 6 || !digit(int) || !digit(frac) {
        return None;
    }
    let f: u64 = if frac.is_empty() { 0 } else { frac.parse::<u64>().ok()? * 10u64.pow(6 - frac.len() as u32) };
    int.parse::<u64>().ok()?.checked_mul(1_000_000)?.checked_add(f)
}

/// One row of `requests.csv`: one request, in id order. Times are ms since the run's start;
/// an empty cell is a time the request never reached (or a latency it has not got).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RequestRow<'a> {
    pub id: u64,
    pub arrival_ms: Ms,
    pub scheduled_ms: Option<Ms>,
    pub first_token_ms: Option<Ms>,
    /// When it finished, or was rejected, timed out or lost.
    pub finish_ms: Option<Ms>,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    pub status: &'a str,
    /// Why it was rejected; empty otherwise.
    pub reject_reason: &'a str,
    pub preemptions: u32,
    pub instance: Option<u32>,
    /// 1 if it arrived inside the measured window (warm-up and cool-down excluded).
    pub measured: u8,
    pub ttft_ms: Option<Ms>,
    pub tpot_ms: Option<Fixed<6>>,
    pub e2e_ms: Option<Ms>,
    pub queue_ms: Option<Ms>,
    pub class: u8,
}

/// One row of `timeseries.csv`: one metrics window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct WindowRow {
    pub t_s: Fixed<3>,
    pub arrivals: u64,
    pub rejections: u64,
    pub completions: u64,
    pub first_tokens: u64,
    pub waiting_mean: Fixed<4>,
    pub running_mean: Fixed<4>,
    pub kv_used_blocks_mean: Fixed<2>,
    pub kv_utilization_mean: Fixed<6>,
    pub ttft_ms_p99: Option<Fixed<3>>,
    pub instances_mean: Fixed<4>,
    pub instances_ready_mean: Fixed<4>,
    pub failures: u64,
    pub restarts: u64,
    pub slo_attainment: Option<Fixed<6>>,
}

/// A float written as Rust's shortest text that reads back to it (`500`, `0.99`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Plain(pub f64);

impl Serialize for Plain {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Plain {
    fn deserialize<De: Deserializer<'de>>(d: De) -> Result<Self, De::Error> {
        f64::deserialize(d).map(Plain)
    }
}

/// The metric cells of one `compare.csv` row. A row is the variant's name, the varied keys'
/// values, these cells, each changed metric's `<metric>_change_pct` against the baseline, and
/// [`ClassCells`] per priority class (`class<N>_<metric>`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CompareCells {
    pub ttft_ms_p50: Fixed<3>,
    pub ttft_ms_p99: Fixed<3>,
    pub tpot_ms_p50: Fixed<3>,
    pub tpot_ms_p99: Fixed<3>,
    pub itl_ms_p99: Fixed<3>,
    pub e2e_ms_p99: Fixed<3>,
    pub queue_ms_p99: Fixed<3>,
    pub throughput_rps: Fixed<3>,
    pub output_tokens_per_s: Fixed<3>,
    pub attainment: Fixed<6>,
    pub goodput_rps: Fixed<3>,
    pub kv_peak: Fixed<6>,
    pub preemptions: u64,
    pub finished: u64,
    pub rejected: u64,
    /// The variant's `[slo]` thresholds and attainment target, empty when it sets none.
    pub slo_ttft_ms: Option<Plain>,
    pub slo_tpot_ms: Option<Plain>,
    pub slo_target: Option<Plain>,
}

/// One priority class's cells in a `compare.csv` row (empty when the variant has no such class).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ClassCells {
    pub ttft_ms_p99: Option<Fixed<3>>,
    pub queue_ms_p99: Option<Fixed<3>>,
    pub attainment: Option<Fixed<6>>,
    pub goodput_rps: Option<Fixed<3>>,
}

/// The column names of a row type, in order (the header the csv crate writes for it).
pub(crate) fn header<T: Serialize + Default>() -> Vec<String> {
    let mut w = csv::Writer::from_writer(vec![]);
    w.serialize(T::default()).expect("a default row serialises");
    let text = String::from_utf8(w.into_inner().expect("writes to memory")).expect("UTF-8 names");
    text.lines().next().unwrap_or_default().split(',').map(str::to_string).collect()
}

/// Writes `rows` as CSV with a header line, also when there are no rows (the header then comes
/// from `T::default()`), and returns the writer.
pub(crate) fn write_rows<W: Write, T: Serialize + Default>(w: W, rows: impl IntoIterator<Item = T>) -> csv::Result<W> {
    let mut out = csv::Writer::from_writer(w);
    let mut any = false;
    for r in rows {
        out.serialize(r)?;
        any = true;
    }
    if !any {
        out.write_record(header::<T>())?;
    }
    out.into_inner().map_err(|e| csv::Error::from(e.into_error()))
}

/// Reads a CSV file a row at a time: `f` gets each record and the header (to deserialize a
/// row type by column names, borrowing from the record); an error names the file and line.
pub(crate) fn each_record(
    path: &std::path::Path,
    mut f: impl FnMut(&csv::StringRecord, &csv::StringRecord) -> Result<(), csv::Error>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut rdr = csv::Reader::from_path(path).with_context(|| format!("reading {}", path.display()))?;
    let headers = rdr.headers().with_context(|| format!("reading {}", path.display()))?.clone();
    let mut rec = csv::StringRecord::new();
    let mut line = 1;
    while rdr.read_record(&mut rec).with_context(|| format!("reading {}", path.display()))? {
        line += 1;
        f(&rec, &headers).with_context(|| format!("{}:{line}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ms_round_trips_exactly_and_refuses_what_it_did_not_write() {
        for ns in [0u64, 1, 999_999, 1_000_000, 123_456_789_012, u64::MAX / 2] {
            let row = RequestRow { id: 7, arrival_ms: Ms(SimTime(ns)), ..Default::default() };
            let text = String::from_utf8(write_rows(vec![], [row.clone()]).unwrap()).unwrap();
            let mut rdr = csv::Reader::from_reader(text.as_bytes());
            let headers = rdr.headers().unwrap().clone();
            let rec = rdr.records().next().unwrap().unwrap();
            let back: RequestRow = rec.deserialize(Some(&headers)).unwrap();
            assert_eq!(back, row, "{text}");
            // The float the report draws is the float of the written text.
            let written: f64 = rec[1].parse().unwrap();
            assert_eq!(back.arrival_ms.as_f64(), written, "{}", &rec[1]);
            // The serialised text is the Display text, byte for byte.
            assert_eq!(&rec[1], Ms(SimTime(ns)).to_string(), "{ns}");
        }
        assert_eq!(Ms(SimTime(u64::MAX)).to_string(), "18446744073709.551615");
        let row = RequestRow { arrival_ms: Ms(SimTime(u64::MAX)), ..Default::default() };
        let text = String::from_utf8(write_rows(vec![], [row]).unwrap()).unwrap();
        assert!(text.lines().nth(1).unwrap().starts_with("0,18446744073709.551615,"), "{text}");
        assert_eq!(parse_ms("12.5"), Some(12_500_000));
        assert_eq!(parse_ms("3"), Some(3_000_000));
        for bad in ["", ".5", "1.2345678", "-1.0", "1e3", "1.x", "99999999999999999999.0"] {
            assert_eq!(parse_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_empty_file_still_has_its_header_and_empty_cells_are_none() {
        let text = String::from_utf8(write_rows(vec![], Vec::<WindowRow>::new()).unwrap()).unwrap();
        assert_eq!(
            text,
            "t_s,arrivals,rejections,completions,first_tokens,waiting_mean,running_mean,kv_used_blocks_mean,\
             kv_utilization_mean,ttft_ms_p99,instances_mean,instances_ready_mean,failures,restarts,slo_attainment\n"
        );
        let row = WindowRow { t_s: Fixed(1.0), waiting_mean: Fixed(2.25), ..Default::default() };
        let text = String::from_utf8(write_rows(vec![], [row.clone()]).unwrap()).unwrap();
        assert_eq!(text.lines().nth(1), Some("1.000,0,0,0,0,2.2500,0.0000,0.00,0.000000,,0.0000,0.0000,0,0,"));
        let mut rdr = csv::Reader::from_reader(text.as_bytes());
        let back: WindowRow = rdr.deserialize().next().unwrap().unwrap();
        assert_eq!(back, row);
    }

    #[test]
    fn the_report_names_only_columns_the_writers_write() {
        let cols = header::<CompareCells>();
        for (name, _, _) in crate::report::html::KEY_METRICS {
            assert!(cols.iter().any(|c| c == name), "the key table reads {name}, compare.csv has {cols:?}");
        }
        let changed = crate::commands::compare::changed_names();
        for name in changed {
            assert!(cols.iter().any(|c| *c == name), "{name}_change_pct: compare.csv has no {name}");
        }
    }
}

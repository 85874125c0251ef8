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
        let mut buf = [0u8; 48];
        match fixed_text(self.0, D as u32, &mut buf) {
            Some(t) => s.serialize_str(t),
            None => s.collect_str(&format_args!("{:.*}", D, self.0)),
        }
    }
}

/// `{:.d}` of `x` (d ≤ 9), written without the formatter, whose exact mode is slow on some
/// values: the float's exact binary value times 10^d, rounded half to even — what the standard
/// library writes (a test compares them). `None` for values it leaves to the formatter:
/// non-finite, or 10¹⁵ and above.
pub(crate) fn fixed_text(x: f64, d: u32, buf: &mut [u8; 48]) -> Option<&str> {
    fixed_bytes(x, d, buf).map(|b| std::str::from_utf8(b).expect("ASCII digits"))
}

/// [`fixed_text`] as bytes (a writer of bytes need not check them as text).
fn fixed_bytes(x: f64, d: u32, buf: &mut [u8; 48]) -> Option<&[u8]> {
    if !x.is_finite() || x.abs() >= 1e15 || d > 9 {
        return None;
    }
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    // x = m × 2^e with e < 0 (|x| < 10¹⁵ < 2⁵⁰ and m ≥ 2⁵² for normal numbers).
    let (m, e) = if biased == 0 { (frac, -1074) } else { (frac | 1u64 << 52, biased - 1075) };
    let pow = 10u128.pow(d);
    let scaled = m as u128 * pow; // < 2⁵³ × 10⁹ < 2⁸³
    let shift = (-e) as u32;
    let q = if shift >= 127 {
        0 // below 2⁸³⁻¹²⁷: rounds to zero
    } else {
        let q = scaled >> shift;
        let rem = scaled & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        q + (rem > half || (rem == half && q & 1 == 1)) as u128
    };
    // |x| < 10¹⁵ and d ≤ 9: both parts fit 64 bits (digits in 64-bit arithmetic are cheaper).
    let (mut int, mut fr) = ((q / pow) as u64, (q % pow) as u64);
    let mut i = buf.len();
    for _ in 0..d {
        i -= 1;
        buf[i] = b'0' + (fr % 10) as u8;
        fr /= 10;
    }
    if d > 0 {
        i -= 1;
        buf[i] = b'.';
    }
    loop {
        i -= 1;
        buf[i] = b'0' + (int % 10) as u8;
        int /= 10;
        if int == 0 {
            break;
        }
    }
    if x.is_sign_negative() {
        i -= 1;
        buf[i] = b'-';
    }
    Some(&buf[i..])
}

impl<'de, const D: usize> Deserialize<'de> for Fixed<D> {
    fn deserialize<De: Deserializer<'de>>(d: De) -> Result<Self, De::Error> {
        f64::deserialize(d).map(Fixed)
    }
}

/// "00", "01", … "99".
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

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
        f.write_str(self.text(&mut [0u8; 32]))
    }
}

impl Ms {
    /// The text (`12.345678`) in `buf`, without the formatter (a run writes several per request).
    fn text(self, buf: &mut [u8; 32]) -> &str {
        std::str::from_utf8(self.bytes(buf)).expect("ASCII digits")
    }

    /// [`Ms::text`] as bytes: the whole milliseconds by `itoa`, the six decimals as three pairs.
    fn bytes(self, buf: &mut [u8; 32]) -> &[u8] {
        let (int, frac) = (self.0 .0 / 1_000_000, (self.0 .0 % 1_000_000) as usize);
        let mut digits = itoa::Buffer::new();
        let head = digits.format(int).as_bytes();
        let n = head.len();
        buf[..n].copy_from_slice(head);
        buf[n] = b'.';
        for (k, pair) in [frac / 10_000, frac / 100 % 100, frac % 100].into_iter().enumerate() {
            buf[n + 1 + 2 * k..n + 3 + 2 * k].copy_from_slice(&PAIRS[2 * pair..2 * pair + 2]);
        }
        &buf[..n + 7]
    }
}

impl Serialize for Ms {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.text(&mut [0u8; 32]))
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

impl RequestRow<'_> {
    /// Appends the row as the csv crate writes it (`write_rows`), field by field without serde:
    /// requests.csv has a row per request. None of its fields needs quoting: numbers, and
    /// status and reason words (checked: `write_requests_rows` refuses one that would).
    fn write_csv(&self, out: &mut Vec<u8>) {
        fn int(out: &mut Vec<u8>, n: u64) {
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        }
        fn ms(out: &mut Vec<u8>, v: Option<Ms>) {
            if let Some(v) = v {
                out.extend_from_slice(v.bytes(&mut [0u8; 32]));
            }
        }
        int(out, self.id);
        out.push(b',');
        ms(out, Some(self.arrival_ms));
        for v in [self.scheduled_ms, self.first_token_ms, self.finish_ms] {
            out.push(b',');
            ms(out, v);
        }
        for n in [self.prompt_tokens, self.output_tokens] {
            out.push(b',');
            int(out, n as u64);
        }
        for w in [self.status, self.reject_reason] {
            out.push(b',');
            out.extend_from_slice(w.as_bytes());
        }
        out.push(b',');
        int(out, self.preemptions as u64);
        out.push(b',');
        if let Some(i) = self.instance {
            int(out, i as u64);
        }
        out.push(b',');
        int(out, self.measured as u64);
        out.push(b',');
        ms(out, self.ttft_ms);
        out.push(b',');
        if let Some(t) = self.tpot_ms {
            match fixed_bytes(t.0, 6, &mut [0u8; 48]) {
                Some(text) => out.extend_from_slice(text),
                None => {
                    use std::io::Write as _;
                    write!(out, "{:.6}", t.0).expect("writes to memory");
                }
            }
        }
        for v in [self.e2e_ms, self.queue_ms] {
            out.push(b',');
            ms(out, v);
        }
        out.push(b',');
        int(out, self.class as u64);
        out.push(b'\n');
    }
}

/// Writes request rows exactly as [`write_rows`] does (header included), faster: see
/// [`RequestRow::write_csv`]. A status or reason that would need quoting is an error, never a
/// malformed file.
pub(crate) fn write_request_rows<'a, W: Write>(
    mut w: W,
    rows: impl IntoIterator<Item = RequestRow<'a>>,
) -> std::io::Result<W> {
    let mut buf: Vec<u8> = header::<RequestRow>().join(",").into_bytes();
    buf.push(b'\n');
    let plain = |s: &str| !s.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'));
    for r in rows {
        if !plain(r.status) || !plain(r.reject_reason) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "request {}: status {:?} / reason {:?} would need CSV quoting",
                    r.id, r.status, r.reject_reason
                ),
            ));
        }
        r.write_csv(&mut buf);
        if buf.len() >= 1 << 16 {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)?;
    Ok(w)
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

/// compare.csv's last column: what priced the row, a group's line after another's (" | ").
pub(crate) const PRICED_BY: &str = "priced_by";

/// The metric cells of one `compare.csv` row. A row is the variant's name, the varied keys'
/// values, these cells, each changed metric's `<metric>_change_pct` against the baseline, its
/// range over the seeds, [`ClassCells`] per priority class (`class<N>_<metric>`), and what
/// priced it ([`PRICED_BY`]).
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
    fn fixed_text_writes_what_the_formatter_writes() {
        // Exact ties (k/2^n: half to even), near-ties, negatives and negative zero, subnormals,
        // values rounding up across a power of ten, and pseudo-random floats of every scale.
        let mut xs = vec![0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 0.125, 0.375, 1e-300, 5e-324, -1e-7, 9.9999995, 0.9995];
        xs.extend((0..2000).map(|k| k as f64 / 1024.0));
        xs.extend((0..2000).map(|k| k as f64 * 0.0005));
        xs.extend((0..2000).map(|k| k as f64 / 7.0 + 1e-7 * k as f64));
        let mut r: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            let scale = 10f64.powi((r % 30) as i32 - 15);
            xs.push((r >> 11) as f64 / (1u64 << 53) as f64 * scale * if r & 1 == 1 { -1.0 } else { 1.0 });
        }
        xs.extend([f64::NAN, f64::INFINITY, 1e15, 3e17]);
        let mut fast = 0;
        for &x in &xs {
            for d in 0..=9u32 {
                let std = format!("{:.*}", d as usize, x);
                if let Some(t) = fixed_text(x, d, &mut [0u8; 48]) {
                    assert_eq!(t, std, "{x:e} at {d} decimals");
                    fast += 1;
                }
            }
            // Through serde, as the csv writer writes it.
            let rows = write_rows(vec![], [WindowRow { t_s: Fixed(x), ..Default::default() }]).unwrap();
            let text = String::from_utf8(rows).unwrap();
            assert_eq!(text.lines().nth(1).unwrap().split(',').next().unwrap(), format!("{x:.3}"));
        }
        assert_eq!(fast, (xs.len() - 4) * 10, "only non-finite values and 1e15 up go to the formatter");
    }

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
            // The written text is whole ms, a point and six digits of ns.
            assert_eq!(&rec[1], format!("{}.{:06}", ns / 1_000_000, ns % 1_000_000), "{ns}");
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
    fn request_rows_written_by_hand_equal_the_csv_crates_bytes() {
        let rows: Vec<RequestRow> = (0..300u64)
            .map(|k| RequestRow {
                id: k * 7919,
                arrival_ms: Ms(SimTime(k * 123_456_789 + k % 7)),
                scheduled_ms: (k % 3 != 0).then_some(Ms(SimTime(k * 1_000_003))),
                first_token_ms: (k % 4 != 0).then_some(Ms(SimTime(k * 2_000_011))),
                finish_ms: (k % 5 != 0).then_some(Ms(SimTime(u64::MAX - k))),
                prompt_tokens: (k * 37) as u32,
                output_tokens: u32::MAX - k as u32,
                status: ["finished", "rejected", "timed_out", "in_flight"][(k % 4) as usize],
                reject_reason: if k % 4 == 1 { "context_too_long" } else { "" },
                preemptions: (k % 9) as u32,
                instance: (k % 6 != 0).then_some((k % 11) as u32),
                measured: (k % 2) as u8,
                ttft_ms: (k % 4 != 0).then_some(Ms(SimTime(k * 999))),
                tpot_ms: (k % 3 != 1).then_some(Fixed(k as f64 / 7.0 + 1e-7 * k as f64)),
                e2e_ms: (k % 5 != 0).then_some(Ms(SimTime(k))),
                queue_ms: (k % 7 != 0).then_some(Ms(SimTime(k * 13))),
                class: (k % 250) as u8,
            })
            .collect();
        let by_crate = write_rows(vec![], rows.clone()).unwrap();
        let by_hand = write_request_rows(vec![], rows).unwrap();
        assert_eq!(String::from_utf8(by_hand).unwrap(), String::from_utf8(by_crate).unwrap());
        // No rows: the header alone, as the crate writes it.
        let empty: Vec<RequestRow> = vec![];
        assert_eq!(write_request_rows(vec![], empty.clone()).unwrap(), write_rows(vec![], empty).unwrap());
        // A word that would need quoting is refused, not written unquoted.
        let bad = RequestRow { status: "a,b", ..Default::default() };
        assert!(write_request_rows(vec![], [bad]).is_err());
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
}

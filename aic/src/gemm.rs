//! GEMM tables: latency (ms) of an `m × k` by `k × n` product by (dtype, kernel, m, n, k).
//!
//! The database measures a grid of (n, k) weight shapes, each over a grid of token counts m.
//! A model's own (n, k) is often between grid sites (llama-3-8b's gate/up projection,
//! n = 28672, lies between 16384 and 51200). There the time is read in *utilization*: each
//! measured time is divided into its speed-of-light time, max(2mnk / peak, bytes / bandwidth),
//! the utilization is interpolated bilinearly in (log n, log k) between the four sites around
//! the target at the same m, and the target's own speed-of-light time is divided by it. Beyond
//! the measured sites the utilization of the nearest one is kept and the speed-of-light time
//! carries the growth — the rule AIConfigurator applies (`aic-core/.../perf_database/gemm.rs`,
//! "holds the boundary util and lets the analytic SOL carry the growth"). How well the rule
//! reads a shape it has not seen is measured by leaving out each measured site in turn and
//! reading it from the rest.

use std::collections::BTreeMap;

use servesim_sim::cost::profile::ErrorStats;

use crate::db::Db;

/// The speed-of-light model used to read between sites: peak FLOP/s of the dtype and memory
/// bandwidth, bytes per weight element (activations are 2-byte).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sol {
    pub(crate) flops: f64,
    pub(crate) bytes_per_s: f64,
    pub(crate) weight_bytes: f64,
}

impl Sol {
    /// Speed-of-light seconds of an m × n × k GEMM.
    pub(crate) fn seconds(&self, m: f64, n: f64, k: f64) -> f64 {
        let compute = 2.0 * m * n * k / self.flops;
        let memory = (n * k * self.weight_bytes + 2.0 * m * (n + k)) / self.bytes_per_s;
        compute.max(memory)
    }
}

/// The measured GEMMs of one dtype and kernel.
#[derive(Clone, Debug)]
pub(crate) struct GemmTable {
    pub(crate) file: String,
    pub(crate) dtype: String,
    pub(crate) kernel: String,
    /// (n, k) → sorted (m, ms).
    sites: BTreeMap<(u64, u64), Vec<(u64, f64)>>,
    sol: Sol,
}

/// An op's table read from a [`GemmTable`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GemmRead {
    /// (m, ms), m ascending.
    pub(crate) points: Vec<(u64, f64)>,
    /// Whether the (n, k) site itself was measured.
    pub(crate) measured: bool,
    /// The sites read, in words.
    pub(crate) shape: String,
}

impl GemmTable {
    /// Loads the rows of `dtype` (`bfloat16`, `fp8`, `fp8_block`, `nvfp4`, ...) from a GEMM file;
    /// `kernel` picks among several kernels for the dtype (default: the one with the most rows).
    pub(crate) fn load(
        db: &Db,
        file: &str,
        dtype: &str,
        kernel: Option<&str>,
        sol: Sol,
    ) -> Result<GemmTable, crate::Error> {
        let f = db.frame(file, &["kernel_source", "gemm_dtype", "m", "n", "k", "latency"])?;
        let dtypes = f.strs("gemm_dtype")?;
        let kernels = if f.has("kernel_source") { f.strs("kernel_source")? } else { vec![""; f.rows] };
        let (m, n, k, lat) = (f.ints("m")?, f.ints("n")?, f.ints("k")?, f.floats("latency")?);
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for i in 0..f.rows {
            if dtypes[i] == dtype {
                *counts.entry(kernels[i]).or_default() += 1;
            }
        }
        if counts.is_empty() {
            let mut have: Vec<&str> = dtypes.clone();
            have.sort();
            have.dedup();
            return Err(format!("{file}: no GEMMs of dtype {dtype} (it has {})", have.join(", ")).into());
        }
        let mut ranked: Vec<(String, usize)> = counts.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let kernel = match kernel {
            Some(want) => ranked.iter().find(|(k, _)| k == want).map(|(k, _)| k.clone()).ok_or_else(|| {
                let names: Vec<&str> = ranked.iter().map(|(k, _)| k.as_str()).collect();
                format!("{file}: no {dtype} GEMMs of kernel {want} (it has {})", names.join(", "))
            })?,
            None => ranked[0].0.clone(),
        };
        let mut sites: BTreeMap<(u64, u64), Vec<(u64, f64)>> = BTreeMap::new();
        for i in 0..f.rows {
            if dtypes[i] != dtype || kernels[i] != kernel {
                continue;
            }
            if m[i] <= 0 || n[i] <= 0 || k[i] <= 0 || !(lat[i].is_finite() && lat[i] > 0.0) {
                return Err(format!(
                    "{file}: row {i}: m {} n {} k {} latency {}: expected positive numbers",
                    m[i], n[i], k[i], lat[i]
                )
                .into());
            }
            sites.entry((n[i] as u64, k[i] as u64)).or_default().push((m[i] as u64, lat[i]));
        }
        for pts in sites.values_mut() {
            // Stable: repeated measurements of one shape keep the first row (the database's
            // own rule, first row wins).
            pts.sort_by_key(|p| p.0);
            pts.dedup_by_key(|p| p.0);
        }
        Ok(GemmTable { file: file.to_string(), dtype: dtype.to_string(), kernel, sites, sol })
    }

    /// This table with each point at most `graph`'s at the same (n, k) and m: for a table timed
    /// without CUDA graphs, whose times at small m are the host's cost of launching the op
    /// rather than the kernel's, bounded by a kernel of the same bytes and FLOPs timed under
    /// CUDA graphs, as an engine serving under CUDA graphs runs it. Points `graph` lacks are
    /// kept.
    pub(crate) fn bounded_by(mut self, graph: &GemmTable) -> GemmTable {
        for (site, pts) in self.sites.iter_mut() {
            let Some(g) = graph.sites.get(site) else { continue };
            for (m, ms) in pts.iter_mut() {
                if let Ok(i) = g.binary_search_by_key(m, |p| p.0) {
                    *ms = ms.min(g[i].1);
                }
            }
        }
        self.kernel = format!("{} (each point at most the CUDA-graph-timed {}'s)", self.kernel, graph.kernel);
        self
    }

    /// The times of an (n, k) GEMM at every measured m: the site's own rows when it was
    /// measured, else read between sites in utilization (see the module's docs).
    pub(crate) fn at(&self, n: u64, k: u64) -> Result<GemmRead, crate::Error> {
        if let Some(p) = self.sites.get(&(n, k)) {
            return Ok(GemmRead { points: p.clone(), measured: true, shape: format!("n {n}, k {k} measured") });
        }
        self.between(n, k, None)
    }

    /// Reads (n, k) from the sites other than `skip`.
    fn between(&self, n: u64, k: u64, skip: Option<(u64, u64)>) -> Result<GemmRead, crate::Error> {
        let usable = |s: &(u64, u64)| Some(*s) != skip;
        let ns: Vec<u64> = dedup(self.sites.keys().filter(|s| usable(s)).map(|s| s.0).collect());
        let (n0, n1) = bracket(&ns, n).ok_or_else(|| format!("{}: no {} GEMMs", self.file, self.dtype))?;
        // k neighbours are chosen per n (the grid may not be complete).
        let ks_at = |nn: u64| dedup(self.sites.keys().filter(|s| s.0 == nn && usable(s)).map(|s| s.1).collect());
        let corners: Vec<(u64, u64, f64)> = {
            let mut c = Vec::new();
            for (nn, wn) in weights(n0, n1, n) {
                let ks = ks_at(nn);
                let (k0, k1) = bracket(&ks, k).ok_or_else(|| format!("{}: no GEMMs at n {nn}", self.file))?;
                for (kk, wk) in weights(k0, k1, k) {
                    c.push((nn, kk, wn * wk));
                }
            }
            c
        };
        // m values every corner measured.
        let first = &self.sites[&(corners[0].0, corners[0].1)];
        let mut points = Vec::new();
        'm: for &(m, _) in first {
            let mut log_util = 0.0;
            for &(nn, kk, w) in &corners {
                let pts = &self.sites[&(nn, kk)];
                let Ok(i) = pts.binary_search_by_key(&m, |p| p.0) else { continue 'm };
                let util = self.sol.seconds(m as f64, nn as f64, kk as f64) * 1e3 / pts[i].1;
                log_util += w * util.ln();
            }
            let ms = self.sol.seconds(m as f64, n as f64, k as f64) * 1e3 / log_util.exp();
            points.push((m, ms));
        }
        if points.is_empty() {
            return Err(format!("{}: the sites around n {n}, k {k} share no token counts", self.file).into());
        }
        let mut sites: Vec<String> = corners.iter().map(|(a, b, _)| format!("({a}, {b})")).collect();
        sites.dedup();
        Ok(GemmRead {
            points,
            measured: false,
            shape: format!("n {n}, k {k} not measured: read in utilization between (n, k) sites {}", sites.join(", ")),
        })
    }

    /// The error of reading a site from the others: every site that has measured neighbours on
    /// both sides along n or k is left out in turn and read from the rest, at every m.
    pub(crate) fn transfer_error(&self) -> Option<ErrorStats> {
        let mut errs = Vec::new();
        let ns: Vec<u64> = dedup(self.sites.keys().map(|s| s.0).collect());
        for (&(n, k), pts) in &self.sites {
            let ks: Vec<u64> = dedup(self.sites.keys().filter(|s| s.0 == n).map(|s| s.1).collect());
            let interior_n = ns.first().is_some_and(|&a| a < n) && ns.last().is_some_and(|&b| b > n);
            let interior_k = ks.first().is_some_and(|&a| a < k) && ks.last().is_some_and(|&b| b > k);
            if !(interior_n && interior_k) {
                continue;
            }
            let Ok(read) = self.between(n, k, Some((n, k))) else { continue };
            for (m, ms) in read.points {
                if let Ok(i) = pts.binary_search_by_key(&m, |p| p.0) {
                    errs.push((ms - pts[i].1).abs() / pts[i].1 * 100.0);
                }
            }
        }
        ErrorStats::of(errs)
    }
}

fn dedup(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v.dedup();
    v
}

/// The measured values around `x`: (below, above), or the nearest one twice beyond the range.
fn bracket(sorted: &[u64], x: u64) -> Option<(u64, u64)> {
    let first = *sorted.first()?;
    let last = *sorted.last()?;
    if x <= first {
        return Some((first, first));
    }
    if x >= last {
        return Some((last, last));
    }
    let i = sorted.partition_point(|&v| v < x);
    if sorted[i] == x {
        return Some((x, x));
    }
    Some((sorted[i - 1], sorted[i]))
}

/// Interpolation weights in log space between `a` and `b` at `x` (one weight when a == b).
fn weights(a: u64, b: u64, x: u64) -> Vec<(u64, f64)> {
    if a == b {
        return vec![(a, 1.0)];
    }
    let t = ((x as f64).ln() - (a as f64).ln()) / ((b as f64).ln() - (a as f64).ln());
    vec![(a, 1.0 - t), (b, t)]
}

#[cfg(test)]
mod tests {
    use super::*;

    type Sites = [((u64, u64), Vec<(u64, f64)>)];

    fn table(sites: &Sites, sol: Sol) -> GemmTable {
        GemmTable {
            file: "t".into(),
            dtype: "bfloat16".into(),
            kernel: "k".into(),
            sites: sites.iter().cloned().collect(),
            sol,
        }
    }

    /// vLLM's fp8_block GEMMs, timed eagerly, bounded by the per-tensor fp8 ones timed under
    /// CUDA graphs: b200_sxm vllm 0.24.0 at n 2048, k 3072 measured 0.1697 ms at m 4 and
    /// 0.2012 ms at m 16384 (DeepGEMM) against 0.0073 and 0.2303 (CUTLASS): the bound takes
    /// 0.0073 and keeps 0.2012; a point the bound lacks (m 8) and a site it lacks stay.
    #[test]
    fn an_eager_table_is_bounded_by_the_graph_timed_one() {
        let sol = Sol { flops: 1e15, bytes_per_s: 8e12, weight_bytes: 1.0 };
        let eager = table(
            &[((2048, 3072), vec![(4, 0.1697), (8, 0.1762), (16384, 0.2012)]), ((4096, 3072), vec![(4, 0.2)])],
            sol,
        );
        let graph = table(&[((2048, 3072), vec![(4, 0.0073), (16384, 0.2303)])], sol);
        let b = eager.bounded_by(&graph);
        assert_eq!(b.at(2048, 3072).unwrap().points, vec![(4, 0.0073), (8, 0.1762), (16384, 0.2012)]);
        assert_eq!(b.at(4096, 3072).unwrap().points, vec![(4, 0.2)]);
        assert_eq!(b.kernel, "k (each point at most the CUDA-graph-timed k's)");
    }

    #[test]
    fn between_sites_utilization_is_interpolated_in_log_space() {
        // Compute-bound everywhere (huge bandwidth): sol = 2mnk / 1e12 s.
        let sol = Sol { flops: 1e12, bytes_per_s: 1e30, weight_bytes: 2.0 };
        let ms = |m: f64, n: f64, k: f64, util: f64| 2.0 * m * n * k / 1e12 * 1e3 / util;
        // Utilization 0.5 at n = 1024 and 0.8 at n = 4096 (k = 1024 both).
        let t = table(
            &[
                ((1024, 1024), vec![(16, ms(16.0, 1024.0, 1024.0, 0.5))]),
                ((4096, 1024), vec![(16, ms(16.0, 4096.0, 1024.0, 0.8))]),
            ],
            sol,
        );
        let r = t.at(2048, 1024).unwrap();
        assert!(!r.measured);
        // Halfway in log n: utilization exp((ln 0.5 + ln 0.8) / 2) = sqrt(0.4).
        let want = ms(16.0, 2048.0, 1024.0, 0.4f64.sqrt());
        assert!((r.points[0].1 - want).abs() / want < 1e-12, "{:?} vs {want}", r.points);
        // Beyond the last site: its utilization, the target's own speed of light.
        let r = t.at(16384, 1024).unwrap();
        let want = ms(16.0, 16384.0, 1024.0, 0.8);
        assert!((r.points[0].1 - want).abs() / want < 1e-12);
        // A measured site is returned as measured.
        assert!(t.at(1024, 1024).unwrap().measured);
    }

    #[test]
    fn leaving_a_site_out_measures_the_reading() {
        let sol = Sol { flops: 1e12, bytes_per_s: 1e30, weight_bytes: 2.0 };
        let ms = |n: u64, k: u64, util: f64| 2.0 * 16.0 * n as f64 * k as f64 / 1e12 * 1e3 / util;
        // Only (2048, 1024) has measured neighbours on both sides along n and k. Left out, it
        // is read along k at n = 2048 (utilizations 0.3 and 0.6): sqrt(0.18) against 0.5.
        let mut sites = Vec::new();
        for n in [1024u64, 4096] {
            for k in [512u64, 1024, 2048] {
                sites.push(((n, k), vec![(16u64, ms(n, k, 0.7))]));
            }
        }
        for (k, u) in [(512u64, 0.3), (1024, 0.5), (2048, 0.6)] {
            sites.push(((2048, k), vec![(16u64, ms(2048, k, u))]));
        }
        let t = table(&sites, sol);
        let e = t.transfer_error().unwrap();
        assert_eq!(e.points, 1);
        let want = (0.5 / 0.18f64.sqrt() - 1.0).abs() * 100.0;
        assert!((e.median_pct - want).abs() < 1e-9, "{e:?} vs {want}");
    }
}

//! Prefill/decode disaggregation on one instance: a prefill instance hands requests off after
//! their first token and keeps their KV until the transfer is done; a decode instance takes
//! them in, allocates their blocks (which starts the transfer) and decodes them when it is done.
//!
//! ```text
//!   prefill instance:  running ─(first token)─► outgoing (blocks pinned) ─(transfer done)─► freed
//!   decode instance:   incoming (no blocks, FIFO) ─(blocks free)─► receiving (blocks, transfer
//!                      in flight) ─(transfer done)─► running (a decode, context computed)
//! ```
//! Receiving requests count against `max_num_seqs` (they will run as soon as their KV lands).
//! Requests in the incoming and receiving lists count as waiting in the gauges and as
//! outstanding for routers; outgoing ones count nowhere (the decode instance holds them), but
//! their blocks are in use.

use std::collections::VecDeque;

use super::core::Core;
use super::seq::{Cold, Seq};
use super::Instance;
use crate::instance::Role;
use crate::metrics::Observer;
use crate::time::SimTime;

/// A prefilled request leaving its prefill instance: what the decode instance needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handoff {
    pub(crate) id: u64,
    pub(crate) arrival: SimTime,
    pub(crate) prompt: u32,
    pub(crate) output: u32,
    pub(crate) client: u32,
    pub(crate) class: u8,
    /// Whether its latencies enter the statistics.
    pub(crate) counted: bool,
    /// Tokens of KV that move (its prompt).
    pub(crate) tokens: u64,
    /// When its first token was produced.
    pub(crate) first_token: SimTime,
    /// The prefill instance holding its KV.
    pub(crate) from: u32,
}

/// The requests an instance is handing off or taking in. Boxed like the running batch, since
/// requests move between these lists and the batch.
#[allow(clippy::vec_box)]
#[derive(Debug, Default)]
pub(super) struct Transfers {
    /// Prefill side: handed off, blocks held until the transfer is done.
    outgoing: Vec<Box<Seq>>,
    /// Prefill side: handed off since the engine last asked.
    ready: Vec<Handoff>,
    /// Decode side: waiting for blocks, in arrival order.
    incoming: VecDeque<Box<Seq>>,
    /// Decode side: blocks allocated, KV on the way.
    receiving: Vec<Box<Seq>>,
}

impl Transfers {
    /// Requests the decode side holds (incoming and receiving).
    pub(super) fn held(&self) -> usize {
        self.incoming.len() + self.receiving.len()
    }

    /// Requests with a slot reserved (receiving counts against `max_num_seqs`).
    pub(super) fn slots(&self) -> usize {
        self.receiving.len()
    }

    /// Whether requests in a KV transfer hold blocks here (work may wait for them).
    pub(super) fn pins_blocks(&self) -> bool {
        !self.outgoing.is_empty() || !self.receiving.is_empty()
    }

    /// Block tables of the requests holding blocks here (outgoing and receiving).
    pub(super) fn tables(&self) -> impl Iterator<Item = &[u32]> {
        self.outgoing.iter().chain(&self.receiving).flat_map(|s| [s.blocks.as_slice(), s.cold.window.as_slice()])
    }

    /// Output tokens still to produce by the requests the decode side holds.
    pub(super) fn pending_decode(&self) -> u64 {
        self.incoming.iter().chain(&self.receiving).map(|s| (s.output - s.generated) as u64).sum()
    }
}

impl Instance {
    pub fn role(&self) -> Role {
        self.core.cfg.policy.role
    }

    /// Prefill side: the requests handed off since the last call.
    pub fn take_handoffs(&mut self, out: &mut Vec<Handoff>) {
        out.append(&mut self.core.xfer.ready);
    }

    /// Prefill side: the transfer of `id` is done; its blocks are freed (cached blocks stay
    /// cached).
    pub fn release_handoff(&mut self, id: u64, now: SimTime) {
        let k = self.core.xfer.outgoing.iter().position(|s| s.id == id).expect("released request is outgoing");
        let mut s = self.core.xfer.outgoing.swap_remove(k);
        self.core.kv.blocks.release_at(&mut s.blocks, now);
    }

    /// Decode side: takes in a request prefilled elsewhere; it waits for blocks.
    pub fn offer(&mut self, h: &Handoff) {
        debug_assert_eq!(self.role(), Role::Decode);
        self.core.pending_decode += (h.output - 1) as u64;
        self.core.xfer.incoming.push_back(Box::new(Seq {
            id: h.id,
            computed: h.tokens,
            step: 0,
            blocks: Vec::new(),
            last_token: h.first_token,
            prompt: h.prompt,
            output: h.output,
            generated: 1,
            client: h.client,
            draft: 0,
            counted: h.counted,
            admitted: true,
            class: h.class,
            cold: Cold { arrival: h.arrival, ..Cold::default() },
        }));
    }

    /// Decode side: allocates blocks for incoming requests, first come first served, while
    /// `max_num_seqs` and the free blocks (less the watermark when others run) allow; pushes
    /// the ids whose transfer starts now.
    pub fn start_transfers(&mut self, rec: &mut dyn Observer, started: &mut Vec<u64>) {
        while let Some(s) = self.core.xfer.incoming.front() {
            if self.core.running.len() + self.core.xfer.receiving.len() >= self.core.seq_slots {
                break;
            }
            let need = self.core.blocks_for(s.computed);
            if !self.core.fits(need + self.core.window_need(s.computed, 0), 0) {
                break;
            }
            let mut s = self.core.xfer.incoming.pop_front().expect("front exists");
            for _ in 0..need {
                let b = self.core.kv.alloc_block(rec).expect("checked free blocks");
                s.blocks.push(b);
            }
            self.core.take_window(&mut s, 0, rec);
            started.push(s.id);
            self.core.xfer.receiving.push(s);
        }
    }

    /// Decode side: the KV of `id` has arrived; it joins the batch as a decode.
    pub fn transfer_done(&mut self, id: u64) {
        let k = self.core.xfer.receiving.iter().position(|s| s.id == id).expect("transferred request is receiving");
        let s = self.core.xfer.receiving.remove(k);
        // It starts running here: the queue policy counts it (length tiers' long requests)
        // as it will count it leaving.
        self.core.waiting.queue.admitted(&s);
        self.core.running.push(s);
    }

    /// Ids of the requests this instance hands off (outgoing) and takes in (incoming and
    /// receiving), for the cluster-wide invariant check.
    pub fn transfer_ids(&self) -> (Vec<u64>, Vec<u64>) {
        let x = &self.core.xfer;
        (x.outgoing.iter().map(|s| s.id).collect(), x.incoming.iter().chain(&x.receiving).map(|s| s.id).collect())
    }

    /// Requests receiving their KV now.
    pub fn receiving(&self) -> usize {
        self.core.xfer.receiving.len()
    }

    /// Checks the transfer lists: outgoing requests hold the blocks of their prompt, incoming
    /// ones none, receiving ones the blocks of their transferred KV; only the right roles use
    /// them.
    pub(super) fn check_transfers(&self) {
        let x = &self.core.xfer;
        for s in &x.outgoing {
            assert!(
                s.blocks.len() as u64 >= self.core.blocks_for(s.computed),
                "outgoing request {} lacks blocks",
                s.id
            );
        }
        for s in &x.incoming {
            assert!(s.blocks.is_empty() && s.generated == 1, "incoming request {} holds blocks", s.id);
        }
        for s in &x.receiving {
            assert_eq!(s.blocks.len() as u64, self.core.blocks_for(s.computed), "receiving request {} blocks", s.id);
        }
        if self.role() != Role::Prefill {
            assert!(x.outgoing.is_empty() && x.ready.is_empty(), "instance {} hands off but is not prefill", self.id);
        }
        if self.role() != Role::Decode {
            assert_eq!(x.held(), 0, "instance {} takes requests in but is not decode", self.id);
        }
        assert!(self.core.running.len() + x.slots() <= self.core.cfg.max_num_seqs as usize);
    }
}

/// Prefill side, at the end of an iteration: every running request that has its first
/// token leaves the batch (keeping its blocks) and is handed off.
pub(super) fn hand_off_prefilled(core: &mut Core, from: u32, now: SimTime) {
    let mut i = 0;
    while i < core.running.len() {
        if core.running[i].generated == 0 {
            i += 1;
            continue;
        }
        let mut s = core.running.remove(i);
        debug_assert!(s.generated == 1 && s.computed == s.prompt as u64, "request {} handed off mid-way", s.id);
        core.waiting.queue.left(&s);
        core.pending_decode -= (s.output - s.generated) as u64;
        // Its window's blocks are not handed off: the decode side takes its own.
        core.kv.blocks.release_at(&mut s.cold.window, now);
        core.xfer.ready.push(Handoff {
            id: s.id,
            arrival: s.cold.arrival,
            prompt: s.prompt,
            output: s.output,
            client: s.client,
            class: s.class,
            counted: s.counted,
            tokens: s.computed,
            first_token: now,
            from,
        });
        core.xfer.outgoing.push(s);
    }
}

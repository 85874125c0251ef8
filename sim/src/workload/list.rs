//! A workload given as a list of requests (already parsed from somewhere): they arrive at their
//! own times, in order, as open-loop arrivals.

use super::{Request, NO_CLIENT};

/// Requests replayed in arrival order.
pub(crate) struct RequestList {
    requests: std::vec::IntoIter<Request>,
}

impl RequestList {
    /// Sorts `requests` by arrival (stable: equal times keep their order) and makes every one
    /// an open-loop arrival.
    pub(crate) fn new(mut requests: Vec<Request>) -> RequestList {
        requests.sort_by_key(|r| r.arrival);
        for (i, r) in requests.iter_mut().enumerate() {
            r.id = i as u64;
            r.client = NO_CLIENT;
        }
        RequestList { requests: requests.into_iter() }
    }

    pub(crate) fn pop(&mut self) -> Option<Request> {
        self.requests.next()
    }
}

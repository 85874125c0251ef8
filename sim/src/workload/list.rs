//! A request stream given as a list: requests built by the caller (tests, or anything that
//! constructs sessions and content itself) played in arrival order.

use std::collections::VecDeque;

use super::{Request, NO_CLIENT};

pub struct RequestList {
    requests: VecDeque<Request>,
}

impl RequestList {
    /// `requests` must be sorted by arrival time and belong to no closed-loop client.
    pub fn new(requests: Vec<Request>) -> RequestList {
        assert!(requests.windows(2).all(|w| w[0].arrival <= w[1].arrival), "request list not sorted by arrival");
        assert!(requests.iter().all(|r| r.client == NO_CLIENT), "listed requests are open-loop");
        RequestList { requests: requests.into() }
    }
}

impl Iterator for RequestList {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        self.requests.pop_front()
    }
}

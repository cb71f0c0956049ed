//! Offset resets (ListOffsets): a position waiting for one, because of
//! `seek_to_beginning`, `seek_to_end` or `auto.offset.reset`, moves to
//! the offset its leader lists.

use super::failure::{Refusal, Retry};
use super::position::{PosState, Position};
use super::TopicPartition;
use super::{
    offsets, read_list_offsets, Asked, FetchError, Fetcher, InFlight, OffsetSpec, Planned,
};
use crate::cluster::{Metadata, Response, Target};
use crate::protocol::ApiKey;
use std::collections::BTreeMap;
use std::time::Instant;

impl Fetcher {
    /// One ListOffsets per leader for the positions waiting for a reset
    /// (not asked yet, not backing off).
    pub(super) fn plan_resets(&mut self, now: Instant, metadata: &Metadata, out: &mut Planned) {
        // One pass over the dirty partitions, each looked up once: marked
        // in flight and put in its leader's request.
        let mut per_leader: BTreeMap<i32, (Vec<(TopicPartition, OffsetSpec)>, Asked)> =
            BTreeMap::new();
        for tp in &self.dirty {
            let Some(st) = self.partitions.get_mut(tp) else {
                continue;
            };
            if st.backing_off(now) {
                continue;
            }
            let PosState::Resetting {
                spec,
                in_flight: in_flight @ false,
                ..
            } = &mut st.pos
            else {
                continue;
            };
            let Some(leader) = metadata.leader(&tp.topic, tp.partition) else {
                continue;
            };
            *in_flight = true;
            let (list, sent) = per_leader.entry(leader).or_default();
            list.push((tp.clone(), *spec));
            let epoch = offsets::leader_epoch(metadata, tp);
            sent.insert(tp.clone(), (st.generation, epoch));
        }
        for (broker, (list, sent)) in per_leader {
            let plan = offsets::plan(
                list.iter().map(|(tp, spec)| (tp, *spec)),
                metadata,
                self.config.isolation,
                self.config.request_timeout,
            );
            let token = self.token();
            let asked = InFlight::ListOffsets {
                broker,
                partitions: sent,
            };
            self.in_flight.insert(token, asked);
            for (b, body) in plan.requests {
                debug_assert_eq!(b, broker);
                out.push((Target::Broker(b), body, token));
            }
        }
    }

    /// Reads the ListOffsets answer of `broker` to what `sent` asked:
    /// moves each position still waiting for it, or backs it off.
    pub(super) fn handle_reset(
        &mut self,
        now: Instant,
        broker: i32,
        sent: Asked,
        response: &Response,
        refresh_metadata: &mut bool,
    ) {
        let listed = read_list_offsets(response);
        if let Err(source) = &listed {
            log::warn!("cannot decode ListOffsets response of broker {broker}: {source}");
        }
        let (partitions, around) = self.split();
        let mut settled = Vec::new();
        // Each partition the answer may still move (its request's
        // generation, still resetting), looked up once.
        for (tp, (generation, epoch)) in &sent {
            let Some(st) = partitions.get_mut(tp) else {
                continue;
            };
            let PosState::Resetting { spec, auto, .. } = st.pos else {
                continue;
            };
            if st.generation != *generation {
                continue;
            }
            st.pos.clear_in_flight();
            let Ok(listed) = &listed else {
                around.backoff.failed(&mut st.retry, now);
                continue;
            };
            match listed.get(tp) {
                Some(Ok(Some(found))) => {
                    settled.push(tp.clone());
                    if auto {
                        log::info!("resetting the offset of {tp} to {}", found.offset);
                    } else {
                        log::debug!("{tp} seeks to {} ({spec:?})", found.offset);
                    }
                    st.pos = PosState::Valid(Position {
                        offset: found.offset,
                        leader_epoch: found.leader_epoch,
                    });
                    // The leader answered at this epoch: nothing to
                    // validate until it changes.
                    st.checked_epoch = (*epoch >= 0).then_some(*epoch);
                    st.retry = Retry::default();
                }
                Some(Err(code)) => {
                    let refusal = Refusal {
                        api: ApiKey::ListOffsets,
                        broker,
                        partition: tp,
                        code: *code,
                    };
                    *refresh_metadata |=
                        around
                            .reports
                            .partition_error(&mut st.retry.streak, now, refusal);
                    around.backoff.failed(&mut st.retry, now);
                }
                // No offset, or the partition left out of the answer: ask
                // again later.
                Some(Ok(None)) | None => {
                    log::debug!("ListOffsets from broker {broker} gave no offset for {tp}");
                    around.backoff.failed(&mut st.retry, now);
                }
            }
        }
        if let Err(source) = listed {
            self.reports.push(FetchError::Decode {
                broker,
                api: ApiKey::ListOffsets,
                source,
            });
        }
        for tp in &settled {
            self.check_eof(tp);
        }
    }
}

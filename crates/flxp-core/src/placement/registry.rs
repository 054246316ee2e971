//! The one list of filters and scorers, as data: a built-in filter or scorer is a name, a line for
//! users and the functions that judge ([`BuiltinFilter`], [`StatefulFilter`], [`BuiltinScorer`]),
//! as the rebalancing methods are. A new one is its file plus one line in `filters/mod.rs` or
//! `scorers/mod.rs`.

use std::marker::PhantomData;

use super::normalize::by_max;
use super::{Ctx, Filter, FilterKind, FilterState, NodeView, Reason, Scorer};
use crate::cluster::NodeIdx;

/// A built-in filter without state of its own: its name, a line for users and its checks.
pub struct BuiltinFilter {
    /// Stable kebab-case name.
    pub name: &'static str,
    /// One line for users (GUIDE, explanations).
    pub doc: &'static str,
    kind: FilterKind,
    check: fn(&Ctx, &NodeView) -> Result<(), Reason>,
    passes: Option<fn(&Ctx, &NodeView) -> bool>,
    applies: Option<fn(&Ctx) -> bool>,
}

impl BuiltinFilter {
    /// A filter judging with `check`; whether it passes is derived from it.
    pub const fn new(
        name: &'static str,
        kind: FilterKind,
        doc: &'static str,
        check: fn(&Ctx, &NodeView) -> Result<(), Reason>,
    ) -> Self {
        Self {
            name,
            doc,
            kind,
            check,
            passes: None,
            applies: None,
        }
    }

    /// With a verdict that skips building the reason (the planner's hot path); must agree with
    /// the check.
    pub const fn with_passes(self, passes: fn(&Ctx, &NodeView) -> bool) -> Self {
        Self {
            passes: Some(passes),
            ..self
        }
    }

    /// Only run for subjects it may refuse a node to: `applies` false means the filter passes on
    /// every node for this decision, so the pipeline skips it (most subjects have no rule of a
    /// given kind). Must depend only on what [`Ctx::new`] is given.
    pub const fn applies_when(self, applies: fn(&Ctx) -> bool) -> Self {
        Self {
            applies: Some(applies),
            ..self
        }
    }

    /// Whether it may refuse some node to this decision's subject (else it is skipped).
    pub fn applies(&self, ctx: &Ctx) -> bool {
        self.applies.is_none_or(|applies| applies(ctx))
    }

    #[inline]
    fn admits(&self, ctx: &Ctx, node: &NodeView) -> bool {
        match self.passes {
            Some(passes) => passes(ctx, node),
            None => (self.check)(ctx, node).is_ok(),
        }
    }
}

impl Filter for BuiltinFilter {
    fn name(&self) -> &'static str {
        self.name
    }
    fn doc(&self) -> &'static str {
        self.doc
    }
    fn kind(&self) -> FilterKind {
        self.kind
    }
    fn is_conditional(&self) -> bool {
        self.applies.is_some()
    }
    fn prepare(&self, ctx: &Ctx) -> Option<Box<FilterState>> {
        // `()` in a box allocates nothing.
        self.applies(ctx).then(|| Box::new(()) as Box<FilterState>)
    }
    fn check_with(&self, ctx: &Ctx, _: &FilterState, node: &NodeView) -> Result<(), Reason> {
        (self.check)(ctx, node)
    }
    #[inline]
    fn passes_with(&self, ctx: &Ctx, _: &FilterState, node: &NodeView) -> bool {
        self.admits(ctx, node)
    }
    fn retain(&self, ctx: &Ctx, _: &FilterState, nodes: &mut Vec<NodeIdx>) {
        nodes.retain(|&n| self.admits(ctx, &ctx.view(n)));
    }
}

/// A filter with state of its own, worked out once per decision by `prepare` and handed to its
/// checks on every node: typed (`S`), and private to the filter. `prepare` returning `None`
/// means it passes every node for this subject, so the pipeline skips it.
pub struct StatefulFilter<S> {
    /// Stable kebab-case name.
    pub name: &'static str,
    /// One line for users (GUIDE, explanations).
    pub doc: &'static str,
    kind: FilterKind,
    prepare: fn(&Ctx) -> Option<S>,
    check: fn(&Ctx, &S, &NodeView) -> Result<(), Reason>,
    passes: Option<fn(&Ctx, &S, &NodeView) -> bool>,
    state: PhantomData<fn() -> S>,
}

impl<S: Send + Sync + 'static> StatefulFilter<S> {
    /// A filter preparing its state with `prepare` and judging with `check`; whether it passes
    /// is derived from the check.
    pub const fn new(
        name: &'static str,
        kind: FilterKind,
        doc: &'static str,
        prepare: fn(&Ctx) -> Option<S>,
        check: fn(&Ctx, &S, &NodeView) -> Result<(), Reason>,
    ) -> Self {
        Self {
            name,
            doc,
            kind,
            prepare,
            check,
            passes: None,
            state: PhantomData,
        }
    }

    /// With a verdict that skips building the reason (the planner's hot path); must agree with
    /// the check.
    pub const fn with_passes(self, passes: fn(&Ctx, &S, &NodeView) -> bool) -> Self {
        Self {
            passes: Some(passes),
            ..self
        }
    }

    /// Runs `judge` on the filter's own state: the one prepared for this decision, or, handed
    /// another filter's (a misuse of the trait), one prepared afresh.
    #[inline]
    fn on_state<R>(
        &self,
        ctx: &Ctx,
        state: &FilterState,
        pass: R,
        judge: impl FnOnce(&S) -> R,
    ) -> R {
        match state.downcast_ref::<S>() {
            Some(s) => judge(s),
            None => match (self.prepare)(ctx) {
                Some(s) => judge(&s),
                None => pass,
            },
        }
    }

    #[inline]
    fn admits(&self, ctx: &Ctx, state: &S, node: &NodeView) -> bool {
        match self.passes {
            Some(passes) => passes(ctx, state, node),
            None => (self.check)(ctx, state, node).is_ok(),
        }
    }
}

impl<S: Send + Sync + 'static> Filter for StatefulFilter<S> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn doc(&self) -> &'static str {
        self.doc
    }
    fn kind(&self) -> FilterKind {
        self.kind
    }
    /// It prepares per subject, and may pass every node for most.
    fn is_conditional(&self) -> bool {
        true
    }
    fn prepare(&self, ctx: &Ctx) -> Option<Box<FilterState>> {
        (self.prepare)(ctx).map(|s| Box::new(s) as Box<FilterState>)
    }
    fn check_with(&self, ctx: &Ctx, state: &FilterState, node: &NodeView) -> Result<(), Reason> {
        self.on_state(ctx, state, Ok(()), |s| (self.check)(ctx, s, node))
    }
    #[inline]
    fn passes_with(&self, ctx: &Ctx, state: &FilterState, node: &NodeView) -> bool {
        self.on_state(ctx, state, true, |s| self.admits(ctx, s, node))
    }
    fn retain(&self, ctx: &Ctx, state: &FilterState, nodes: &mut Vec<NodeIdx>) {
        self.on_state(ctx, state, (), |s| {
            nodes.retain(|&n| self.admits(ctx, s, &ctx.view(n)));
        });
    }
}

/// How a built-in scorer scores: node by node, or all feasible nodes at once.
#[derive(Clone, Copy)]
enum Score {
    Each(fn(&Ctx, &NodeView) -> f64),
    All(fn(&Ctx, &[NodeView]) -> Vec<f64>),
}

/// A built-in scorer: its name, a line for users and its scoring.
pub struct BuiltinScorer {
    /// Stable kebab-case name, used in policies, config and explanations.
    pub name: &'static str,
    /// One line for users (GUIDE, config errors).
    pub doc: &'static str,
    applies: Option<fn(&Ctx) -> bool>,
    score: Score,
    normalize: fn(&mut [f64]),
}

impl BuiltinScorer {
    /// A scorer of one node at a time, rescaled proportionally to the best.
    pub const fn each(
        name: &'static str,
        doc: &'static str,
        score: fn(&Ctx, &NodeView) -> f64,
    ) -> Self {
        Self {
            name,
            doc,
            applies: None,
            score: Score::Each(score),
            normalize: by_max,
        }
    }

    /// A scorer whose node scores depend on the other nodes, rescaled proportionally to the best.
    pub const fn all(
        name: &'static str,
        doc: &'static str,
        score: fn(&Ctx, &[NodeView]) -> Vec<f64>,
    ) -> Self {
        Self {
            name,
            doc,
            applies: None,
            score: Score::All(score),
            normalize: by_max,
        }
    }

    /// Only consulted for subjects it has something to say about (rule scorers without rules).
    pub const fn applies_when(self, applies: fn(&Ctx) -> bool) -> Self {
        Self {
            applies: Some(applies),
            ..self
        }
    }

    /// With another rescaling to 0..=100 ([`super::min_max`], [`super::as_is`]).
    pub const fn normalized(self, normalize: fn(&mut [f64])) -> Self {
        Self { normalize, ..self }
    }
}

impl Scorer for BuiltinScorer {
    fn name(&self) -> &'static str {
        self.name
    }
    fn applies(&self, ctx: &Ctx) -> bool {
        self.applies.is_none_or(|applies| applies(ctx))
    }
    fn score(&self, ctx: &Ctx, node: &NodeView) -> f64 {
        match self.score {
            Score::Each(score) => score(ctx, node),
            Score::All(score) => score(ctx, std::slice::from_ref(node))
                .first()
                .copied()
                .unwrap_or(f64::NAN),
        }
    }
    fn score_all(&self, ctx: &Ctx, nodes: &[NodeView]) -> Vec<f64> {
        match self.score {
            Score::Each(score) => nodes.iter().map(|n| score(ctx, n)).collect(),
            Score::All(score) => score(ctx, nodes),
        }
    }
    fn normalize(&self, scores: &mut [f64]) {
        (self.normalize)(scores);
    }
}

/// Every built-in filter, in the order they run and are explained (listed in `filters/mod.rs`).
pub static FILTERS: &[&dyn Filter] = super::filters::ALL;

/// Every scorer (listed in `scorers/mod.rs`, next to their modules).
pub static SCORERS: &[&BuiltinScorer] = super::scorers::ALL;

/// The registered scorer of a name.
pub fn scorer(name: &str) -> Option<&'static BuiltinScorer> {
    SCORERS.iter().copied().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_documented_in_one_line() {
        let mut names: Vec<&str> = FILTERS
            .iter()
            .map(|f| f.name())
            .chain(SCORERS.iter().map(|s| s.name))
            .collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate registration");
        let docs = FILTERS.iter().map(|f| f.doc());
        for doc in docs.chain(SCORERS.iter().map(|s| s.doc)) {
            assert!(!doc.is_empty() && !doc.contains('\n'), "{doc:?}");
        }
    }
}

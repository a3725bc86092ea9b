#!/usr/bin/python3
"""An exact reference for `offsim plan`: a mixed-integer model of the plan choice, solved by CBC.

    mip_plan.py SCENARIO --budget BYTES [--schedule all|p1k2|p2k2|p1k1|sync] [--time-limit S]
                [--fix "keep,offload,..."] [--verbose]

For each layer an action (keep, offload, recompute, recompute+offload) and for the whole plan one
schedule (async prefetch/inflight 1/2, 2/2, 1/1, or sync); minimum step time with the peak device
memory within the budget, under the semantics of offsim's engine on the program sim/lower/lower.c
emits for `kind = plan` with the default options (pinned = pooled, dedup, scope = layers,
free = copy-end, start = group, separate streams) and compute_slowdown = 0.  One MIP per schedule;
the best wins.  README.md in this folder gives the formulation.

Prints JSON: step_ms, peak_device_bytes, actions, schedule, status (optimal / time limit /
infeasible / fixed), solve_s, bound_ms, and per schedule what CBC did.  With --fix the plan is
fixed and the MIP minimises the peak instead (its times are then forced): validate.py's mode.
"""

import argparse
import json
import os
import re
import sys
import tempfile
import time

import pulp

# scenario is a module beside this script, where Python looks first.
from scenario import ScenarioError, load, parse_size

ACTIONS = ("keep", "offload", "recompute", "recompute+offload")
K_, O_, R_, RO_ = range(4)
SCHEDULES = {"p1k2": (True, 1, 2), "p2k2": (True, 2, 2), "p1k1": (True, 1, 1), "sync": (False, 0, 1)}
ASYNC_ORDER = ("p1k2", "p2k2", "p1k1")
MIB = float(1 << 20)
EPS = 1e-4         # ms: "not started yet" needs the start this much later (a tie counts as started)
INT_TOL = 1e-9     # CBC's integer tolerance: the big-M slack it leaves (M x 1e-9) stays far below EPS
MARGIN = 1.0       # ms added to every big-M, so that no M is exactly tight
CUT_SLACK = 1e-6   # ms: the valid inequalities are loosened by this, so that none is exactly tight
# CBC 2.10.8 declared feasible fixed plans infeasible with its preprocessing and probing on (60 of
# the 360 plans of validate.py; the engine's own times and orders satisfy every row): both off.
CBC_OPTIONS = os.environ.get("MIP_CBC_OPTIONS", "integerTolerance %g preprocess off probing off" % INT_TOL).split()


class TExpr:
    """A time in ms: a node's variable + a constant + sum of coefficient x action binary."""

    def __init__(self, node, const=0.0, terms=None):
        self.node, self.const, self.terms = node, const, dict(terms or {})

    def plus(self, const=0.0, terms=None):
        t = dict(self.terms)
        for v, c in (terms or {}).items():
            t[v] = t.get(v, 0.0) + c
        return TExpr(self.node, self.const + const, t)

    def pulp(self):
        e = pulp.lpSum(c * v for v, c in self.terms.items()) + self.const
        return e + self.node.var if self.node is not None else e

    def value(self, times, xv):
        base = times[self.node.name] if self.node is not None else 0.0
        return base + self.const + sum(c * xv[v.name] for v, c in self.terms.items())

    def lb(self):
        return (self.node.lb if self.node is not None else 0.0) + self.const

    def ub(self):
        return (self.node.ub if self.node is not None else 0.0) + self.const + \
            sum(c for c in self.terms.values() if c > 0)


class Node:
    """A time that equals the max of its active predecessors: [(TExpr, active)], active None
    (always) or {x: 1} (when that sum of actions is 1)."""

    def __init__(self, name, preds):
        self.name, self.preds = name, preds
        self.lb = max([e.lb() for e, a in preds if a is None] + [0.0])
        self.ub = max([e.ub() for e, a in preds] + [0.0])
        self.var, self.sel, self.bins = None, None, []


def on(a, xv):
    return a is None or sum(c * xv[v.name] for v, c in a.items()) >= 1


class Model:
    def __init__(self, sc, sched, budget, fixed=None, objective="step", allow=None):
        self.sc, self.sched, self.budget, self.objective = sc, sched, budget, objective
        self.async_, self.P, self.K = SCHEDULES[sched]
        self.prob = pulp.LpProblem("plan_" + sched, pulp.LpMinimize)
        self.nodes, self.n_bin = [], 0
        self.orders = []   # (binary, a, b): the binary may be 1 only if a <= b
        self.phases = []   # (c, q1, q2, q3, layer, moment time, contributions)
        self.moments = []  # (name, time TExpr or None, exists {x: 1} or None, [(bytes, var or None)], [c])
        self.aux = []      # (variable, function of (times, xv) giving its exact value)
        self.locus = {}    # order binary's name: (the moment's layer, the item's layer)
        self.x = []
        for i, layer in enumerate(sc["layers"]):
            row = []
            for a in range(4):
                v = pulp.LpVariable("x_%d_%d" % (i, a), cat="Binary")
                if fixed is not None:
                    v.lowBound = v.upBound = 1 if fixed[i] == a else 0
                elif (a == O_ and not layer["tensors"]) or (a == RO_ and layer["input"] == 0) or \
                        (allow is not None and a not in allow):
                    v.upBound = 0
                row.append(v)
            self.prob += pulp.lpSum(row) == 1, "one_action_%d" % i
            self.x.append(row)
        self.cp = [self.copies(i) for i in range(sc["n"])]
        self.f = [l["forward"] * 1e3 for l in sc["layers"]]
        self.b = [l["backward"] * 1e3 for l in sc["layers"]]
        if self.async_:
            self.build_times()
            self.build_memory()
        else:
            self.build_sync()
        self.step = self.step_expr.pulp()
        if objective == "step":
            self.prob += self.step
            for name, t, ex, terms, cs in self.moments:
                self.prob += self.live(terms, cs) <= budget / MIB + self.mem_m * self.absent(ex), "mem_" + name
        else:
            self.peak = pulp.LpVariable("peak", lowBound=sc["static"] / MIB)
            self.prob += self.peak
            for name, t, ex, terms, cs in self.moments:
                self.prob += self.live(terms, cs) - self.mem_m * self.absent(ex) <= self.peak, "mem_" + name

    # ---- helpers ----
    def o(self, i):
        return {self.x[i][O_]: 1, self.x[i][RO_]: 1}

    def r(self, i):
        return {self.x[i][R_]: 1, self.x[i][RO_]: 1}

    def lin(self, d):
        return pulp.lpSum(c * v for v, c in d.items())

    def absent(self, ex):
        return 0 if ex is None else 1 - self.lin(ex)

    def binary(self, name):
        self.n_bin += 1
        return pulp.LpVariable(name, cat="Binary")

    def mem_lin(self, terms):
        return pulp.lpSum((b / MIB) * (v if v is not None else 1) for b, v in terms)

    def live(self, terms, cs):
        return self.mem_lin(terms) + pulp.lpSum(cs)

    def copies(self, i):
        """Layer i's copies in emit order (emit_copies): its input under recompute+offload, then
        each tensor under offload.  (name, bytes, D2H ms, H2D ms, the action that makes it)."""
        sc, layer = self.sc, self.sc["layers"][i]
        lat = sc["latency"]
        t = lambda b, bw: (lat + b / sc[bw]) * 1e3
        out = [("input", layer["input"], t(layer["input"], "d2h_bandwidth"), t(layer["input"], "h2d_bandwidth"),
                self.x[i][RO_])]
        for name, b in layer["tensors"]:
            out.append((name, b, t(b, "d2h_bandwidth"), t(b, "h2d_bandwidth"), self.x[i][O_]))
        return out

    def node(self, name, preds):
        """t = max over active preds: t >= each (big-M when conditional); t <= the selected one."""
        nd = Node(name, preds)
        nd.var = pulp.LpVariable("t_" + name, lowBound=nd.lb, upBound=nd.ub)
        for k, (e, a) in enumerate(preds):
            if a is None:
                self.prob += nd.var >= e.pulp(), "ge_%s_%d" % (name, k)
            else:
                m = max(0.0, e.ub() - nd.lb) + MARGIN
                self.prob += nd.var >= e.pulp() - m * (1 - self.lin(a)), "ge_%s_%d" % (name, k)
        if len(preds) == 1:
            assert preds[0][1] is None, "a node needs an unconditional predecessor"
            self.prob += nd.var <= preds[0][0].pulp(), "le_%s" % name
        else:
            assert any(a is None for _, a in preds), "a node needs an unconditional predecessor"
            nd.bins = [self.binary("z_%s_%d" % (name, k)) for k in range(1, len(preds))]
            if len(nd.bins) > 1:
                self.prob += pulp.lpSum(nd.bins) <= 1, "zsum_%s" % name
            sel = [1 - pulp.lpSum(nd.bins)] + nd.bins
            for k, (e, a) in enumerate(preds):
                m = max(0.0, nd.ub - e.lb()) + MARGIN
                self.prob += nd.var <= e.pulp() + m * (1 - sel[k]), "le_%s_%d" % (name, k)
                if a is not None:
                    self.prob += sel[k] <= self.lin(a), "za_%s_%d" % (name, k)
        self.nodes.append(nd)
        return nd

    # ---- async: times ----
    def build_times(self):
        n, P, K = self.sc["n"], self.P, self.K
        self.FS, self.DS, self.HS, self.BS = [None] * n, [None] * n, [None] * n, [None] * n
        zero = TExpr(None)
        for i in range(n):
            # emit_inflight_wait: F_i waits until layer i - K is on the host, when it offloads
            preds = [(self.FE(i - 1), None)] if i > 0 else [(zero, None)]
            if i - K >= 0:
                preds.append((self.DE(i - K), self.o(i - K)))
            self.FS[i] = self.node("FS%d" % i, preds)
            # emit_offload: the d2h stream waits for F_i's end, after the previous layer's copies
            self.DS[i] = self.node("DS%d" % i, [(self.DE(i - 1) if i > 0 else zero, None), (self.FE(i), self.o(i))])
        for i in range(n - 1, -1, -1):
            # emit_reload: the h2d stream, top layer first, waits for the trigger (the forward pass's
            # end for the top `prefetch` layers, else the start of layer i + P's backward) and for
            # layer i's own offload
            trig = self.FE(n - 1) if i + P >= n else TExpr(self.BS[i + P])
            self.HS[i] = self.node("HS%d" % i, [(self.HE(i + 1) if i + 1 < n else zero, None),
                                               (trig, self.o(i)), (self.DE(i), self.o(i))])
            # emit_reload_for_backward: compute waits until layer i is back
            prev = self.FE(n - 1) if i == n - 1 else self.BE(i + 1)
            self.BS[i] = self.node("BS%d" % i, [(prev, None), (self.HE(i), self.o(i))])
        self.step_expr = self.BE(0)
        self.add_cuts()

    def FE(self, i):
        return TExpr(self.FS[i], self.f[i])

    def DE(self, i, upto=None):
        """End of layer i's D2H copies (through copy `upto`)."""
        terms = {}
        for c, (_, _, d, _, e) in enumerate(self.cp[i]):
            if upto is not None and c > upto:
                break
            terms[e] = terms.get(e, 0.0) + d
        return TExpr(self.DS[i], 0.0, terms)

    def HSc(self, i, c):
        """Start of layer i's H2D copy c."""
        terms = {}
        for _, _, _, h, e in self.cp[i][:c]:
            terms[e] = terms.get(e, 0.0) + h
        return TExpr(self.HS[i], 0.0, terms)

    def HE(self, i):
        return self.HSc(i, len(self.cp[i]))

    def RE(self, i):
        return TExpr(self.BS[i], 0.0, {v: self.f[i] for v in self.r(i)})

    def BE(self, i):
        return self.RE(i).plus(self.b[i])

    def add_cuts(self):
        """Valid inequalities without big-M: the copies each stream must fit between two compute
        events, linear in the actions.  They only tighten the LP relaxation; validate.py checks on
        fixed plans that they never cut off the engine's times."""
        n, P, K = self.sc["n"], self.P, self.K
        dsum = lambda i: pulp.lpSum(d * e for _, _, d, _, e in self.cp[i])
        hsum = lambda i: pulp.lpSum(h * e for _, _, _, h, e in self.cp[i])
        CD, CH = [], [None] * n
        for i in range(n):  # CD[i]: D2H ms of layers 0..i
            v = pulp.LpVariable("CD%d" % i, lowBound=0)
            self.prob += v == (CD[i - 1] if i else 0) + dsum(i), "cd_%d" % i
            self.aux.append((v, lambda T, xv, i=i: sum(d * xv[e.name] for l in range(i + 1)
                                                       for _, _, d, _, e in self.cp[l])))
            CD.append(v)
        for i in range(n - 1, -1, -1):  # CH[i]: H2D ms of layers i..n-1
            v = pulp.LpVariable("CH%d" % i, lowBound=0)
            self.prob += v == (CH[i + 1] if i + 1 < n else 0) + hsum(i), "ch_%d" % i
            self.aux.append((v, lambda T, xv, i=i: sum(h * xv[e.name] for l in range(i, n)
                                                       for _, _, _, h, e in self.cp[l])))
            CH[i] = v
        cd = lambda i: CD[i] if i >= 0 else 0
        ch = lambda i: CH[i] if i < n else 0
        step = self.step_expr.pulp()
        for i in range(n):
            # (1) each layer l <= i - K is on the host before F_i starts; its copies start after F_l
            for j in range(0, i - K + 1):
                self.prob += self.FS[i].var - self.FS[j].var >= self.f[j] + cd(i - K) - cd(j - 1) - CUT_SLACK, \
                    "c1_%d_%d" % (i, j)
            # (2) the reloads of layers i..j run after j's trigger and end before layer i's backward
            for j in range(i, n - P):
                self.prob += self.BS[i].var - self.BS[j + P].var >= ch(i) - ch(j + 1) - CUT_SLACK, \
                    "c2_%d_%d" % (i, j)
            self.prob += self.BS[i].var - self.FE(n - 1).pulp() >= ch(i) - CUT_SLACK, "c2_%d_end" % i
            # (3) the D2H of layers j..i, then i's reload, before layer i's backward (for i <= n - K
            # every D2H of a layer below i has ended in the forward pass)
            if i <= n - K:
                for j in range(i + 1):
                    self.prob += self.BS[i].var - self.FS[j].var >= \
                        self.f[j] + cd(i) - cd(j - 1) + hsum(i) - CUT_SLACK, "c3_%d_%d" % (i, j)
            # (4) every D2H ends before the step does
            self.prob += step - self.FS[i].var >= self.f[i] + cd(n - 1) - cd(i - 1) - CUT_SLACK, "c4_%d" % i

    # ---- async: order binaries ----
    def freed_by(self, name, free_t, e, t, layer):
        """w = 1 only if free_t <= t: freed by moment t (at a tie it is: completions come first)."""
        w = self.binary("w_" + name)
        self.locus[w.name] = (self.moment_layer, layer)
        self.prob += w <= e, "we_" + name
        m = max(0.0, free_t.ub() - t.lb()) + MARGIN
        self.prob += free_t.pulp() - t.pulp() <= m * (1 - w), "wt_" + name
        self.orders.append((w, free_t, t, e))
        return w

    def not_started(self, name, alloc_t, e, t, layer):
        """u = 1 only if alloc_t >= t + EPS: not allocated by moment t (at a tie it is)."""
        u = self.binary("u_" + name)
        self.locus[u.name] = (self.moment_layer, layer)
        self.prob += u <= e, "ue_" + name
        m = max(0.0, t.ub() + EPS - alloc_t.lb()) + MARGIN
        self.prob += t.pulp() + EPS - alloc_t.pulp() <= m * (1 - u), "ut_" + name
        self.orders.append((u, t.plus(EPS), alloc_t, e))
        return u

    def phase_of(self, name, i, t):
        """Layer i's backward at moment t (an H2D copy's start): q1 = its recompute/backward has
        started, q2 = its recompute has ended, q3 = its backward has ended (ties either way).
        Returns c >= the bytes layer i holds in that phase."""
        L = self.sc["layers"][i]
        S, ws, inp = sum(b for _, b in L["tensors"]), L["workspace"], L["input"]
        xK, xO, xR, xRO = self.x[i]
        base = [(inp, xR), (inp, xRO), (S, xK), (S, xO)]          # before: kept, or reloaded
        ph1 = base + [(S, xR), (S, xRO), (ws, xR), (ws, xRO)]      # recomputing
        ph2 = [(inp, xR), (inp, xRO), (S, None), (ws, None)]       # in its backward
        q = [self.binary("q%d_%s" % (k, name)) for k in (1, 2, 3)]
        for v in q:
            self.locus[v.name] = (self.moment_layer, i)
        self.prob += q[1] <= q[0], "qa_" + name
        self.prob += q[2] <= q[1], "qb_" + name
        for k, T in enumerate((TExpr(self.BS[i]), self.RE(i), self.BE(i))):
            m1 = max(0.0, T.ub() - t.lb()) + MARGIN
            m0 = max(0.0, t.ub() - T.lb()) + MARGIN
            self.prob += T.pulp() - t.pulp() <= m1 * (1 - q[k]), "qt%d_%s" % (k, name)  # q = 1: T <= t
            self.prob += t.pulp() - T.pulp() <= m0 * q[k], "qf%d_%s" % (k, name)        # q = 0: T >= t
        c = pulp.LpVariable("c_" + name, lowBound=0)
        big = (inp + S + ws) / MIB + 1.0
        self.prob += c >= self.mem_lin(base) - big * q[0], "pc0_" + name
        self.prob += c >= self.mem_lin(ph1) - big * (1 - q[0] + q[1]), "pc1_" + name
        self.prob += c >= self.mem_lin(ph2) - big * (1 - q[1] + q[2]), "pc2_" + name
        self.phases.append((c, q, i, t, (base, ph1, ph2, [])))
        return c

    # ---- async: memory ----
    def build_memory(self):
        sc, n, P, K = self.sc, self.sc["n"], self.P, self.K
        L = sc["layers"]
        S = [sum(b for _, b in l["tensors"]) for l in L]
        inp = [l["input"] for l in L]
        ws = [l["workspace"] for l in L]
        st = sc["static"]
        self.mem_m = (st + sum(inp) + sum(S) + 2 * max(ws + [0])) / MIB + 1.0
        X = self.x

        def kept(i):  # what layer i holds from its forward to its backward's end whatever the timing
            return [(inp[i], X[i][R_]), (S[i], X[i][K_])]

        def still_out(i, tag, t):
            """Layer i's offloaded memory on the device at t: its D2H copies not ended."""
            out = []
            for c, (_, b, _, _, e) in enumerate(self.cp[i]):
                w = self.freed_by("%s_L%dc%d" % (tag, i, c), self.DE(i, c), e, t, i)
                out += [(b, e), (-b, w)]
            return out

        def back_in(i, tag, t, later, tj):
            """Layer i's reloaded memory at t: its H2D copies started (ties included)."""
            out, prev = [], None
            for c, (_, b, _, _, e) in enumerate(self.cp[i]):
                u = self.not_started("%s_L%dc%d" % (tag, i, c), self.HSc(i, c), e, t, i)
                if (i, c) in later:  # not started at the later moment: not started at this one
                    self.prob += later[(i, c)] <= u, "um_%s_L%dc%d" % (tag, i, c)
                if c > 1:            # tensor copies start in order
                    self.prob += prev <= u, "uc_%s_L%dc%d" % (tag, i, c)
                if c <= 1 and i + P == tj and self.HS[i].bins:
                    # layer i's reload is triggered by B_tj's start: when the trigger is the max
                    # (selector 1), its first copy starts at BS_tj, by this moment
                    self.prob += u <= 1 - self.HS[i].bins[0], "ut0_%s_L%dc%d" % (tag, i, c)
                later[(i, c)] = prev = u
                out += [(b, e), (-b, u)]
            return out

        # F_j's start: the forward allocations of every layer so far; copies of layers above j - K
        # may still be running (F_j waited only for layer j - K's)
        for j in range(n):
            self.moment_layer = j
            t = TExpr(self.FS[j])
            terms = [(st, None)]
            for i in range(j):
                terms += kept(i)
                if i > j - K:
                    terms += still_out(i, "F%d" % j, t)
            terms += [(inp[j], X[j][R_]), (inp[j], X[j][RO_]), (S[j], X[j][K_]), (S[j], X[j][O_]), (ws[j], None)]
            self.moments.append(("F%d" % j, t, None, terms, []))
        # the starts of R_j (at BS_j) and B_j (at RE_j): layers above j are freed; below j, what is
        # kept, the D2H still running of the last K layers, the reloads already started of the
        # P layers below
        for j in range(n - 1, -1, -1):
            self.moment_layer = j
            later = {}
            for which, t in (("B", self.RE(j)), ("R", TExpr(self.BS[j]))):
                tag = "%s%d" % (which, j)
                terms = [(st, None)]
                for i in range(j):
                    terms += kept(i)
                    if i >= n - K:
                        terms += still_out(i, tag, t)
                    if i >= j - P:
                        terms += back_in(i, tag, t, later, j)
                # layer j: everything back (kept, reloaded, recomputed), its input when recomputed,
                # the recompute's workspace or, at the same instant without one, the backward's
                terms += [(inp[j], X[j][R_]), (inp[j], X[j][RO_]), (S[j], None), (ws[j], None)]
                self.moments.append((tag, t, None, terms, []))
        # each H2D copy's start: every D2H has ended; the layers above within P are somewhere in
        # their backward (phases); this layer's earlier copies are back
        for ip in range(n - 1, -1, -1):
            self.moment_layer = ip
            for c, (_, b, _, _, e) in enumerate(self.cp[ip]):
                t = self.HSc(ip, c)
                tag = "H%dc%d" % (ip, c)
                terms = [(st, None)]
                for i in range(ip + 1):
                    terms += kept(i)
                terms += [(self.cp[ip][c2][1], self.cp[ip][c2][4]) for c2 in range(c + 1)]
                cs = [self.phase_of("%s_L%d" % (tag, i), i, t) for i in range(ip + 1, min(ip + P, n - 1) + 1)]
                self.moments.append((tag, t, {e: 1}, terms, cs))

    # ---- sync: everything on the compute stream, in order ----
    def build_sync(self):
        sc, n = self.sc, self.sc["n"]
        L = sc["layers"]
        terms, const = {}, sum(self.f) + sum(self.b)
        for i in range(n):
            for v in self.r(i):
                terms[v] = terms.get(v, 0.0) + self.f[i]
            for _, _, d, h, e in self.cp[i]:
                terms[e] = terms.get(e, 0.0) + d + h
        self.step_expr = TExpr(None, const, terms)
        S = [sum(b for _, b in l["tensors"]) for l in L]
        inp = [l["input"] for l in L]
        ws = [l["workspace"] for l in L]
        st = sc["static"]
        self.mem_m = (st + sum(inp) + sum(S) + 2 * max(ws + [0])) / MIB + 1.0
        below = [(st, None)]
        for j in range(n):
            xK, xO, xR, xRO = self.x[j]
            self.moments.append(("F%d" % j, None, None,
                                 below + [(inp[j], xR), (inp[j], xRO), (S[j], xK), (S[j], xO), (ws[j], None)], []))
            for c, (_, b, _, _, e) in enumerate(self.cp[j]):
                self.moments.append(("H%dc%d" % (j, c), None, {e: 1},
                                     below + [(self.cp[j][c2][1], self.cp[j][c2][4]) for c2 in range(c + 1)], []))
            for which in ("R", "B"):
                self.moments.append(("%s%d" % (which, j), None, None,
                                     below + [(inp[j], xR), (inp[j], xRO), (S[j], None), (ws[j], None)], []))
            below = below + [(inp[j], xR), (S[j], xK)]

    # ---- exact values ----
    def exact_times(self, xv):
        times = {}
        for nd in self.nodes:
            times[nd.name] = max(e.value(times, xv) for e, a in nd.preds if on(a, xv))
        return times

    def assign(self, plan):
        """Every variable at its value for `plan` with the engine's order of events: the times from
        the max-plus equations, each order binary 1 exactly when its implication allows (the
        smallest live bytes), each phase the allowed one of least bytes.  Used as CBC's start and
        as the exact evaluation of a plan under the model's own expressions."""
        xv = {}
        for i, row in enumerate(self.x):
            for a, v in enumerate(row):
                xv[v.name] = 1 if plan[i] == a else 0
                v.varValue = xv[v.name]
        times = self.exact_times(xv)
        val = dict(xv)
        for nd in self.nodes:
            nd.var.varValue = times[nd.name]
            if nd.bins:
                act = [(e.value(times, xv), k) for k, (e, a) in enumerate(nd.preds) if on(a, xv)]
                k = [k for v_, k in act if v_ == times[nd.name]][0]
                for kk, z in enumerate(nd.bins, 1):
                    z.varValue = 1 if kk == k else 0
        for b, lhs, rhs, e in self.orders:
            b.varValue = 1 if xv[e.name] and lhs.value(times, xv) <= rhs.value(times, xv) else 0
            val[b.name] = b.varValue
        cval = {}
        for c, q, i, t, exprs in self.phases:
            tv = t.value(times, xv)
            Ts = (times["BS%d" % i], self.RE(i).value(times, xv), self.BE(i).value(times, xv))
            allowed = [p for p in range(4) if (p == 0 or Ts[p - 1] <= tv) and (p == 3 or tv <= Ts[p])]
            bytes_of = lambda p: sum(b * (xv[v.name] if v is not None else 1) for b, v in exprs[p])
            p = min(allowed, key=bytes_of)
            for k in range(3):
                q[k].varValue = 1 if p > k else 0
            c.varValue = bytes_of(p) / MIB
            cval[c.name] = bytes_of(p)
        for v, fn in self.aux:
            v.varValue = fn(times, xv)
        peak, where = self.peak_of_values(xv, val, cval)
        if self.objective == "peak":
            self.peak.varValue = peak / MIB
        return {"step_ms": self.step_expr.value(times, xv), "peak_device_bytes": peak, "peak_at": where}

    def peak_of_values(self, xv, val, cval):
        peak, where = self.sc["static"], "static"
        for name, t, ex, terms, cs in self.moments:
            if ex is not None and not on(ex, xv):
                continue
            live = sum(b * (val[v.name] if v is not None else 1) for b, v in terms) + sum(cval[c.name] for c in cs)
            if live > peak:
                peak, where = live, name
        return int(peak), where

    # ---- solving ----
    def solve(self, time_limit=None, msg=False, warm=False):
        log = tempfile.NamedTemporaryFile(prefix="mip_plan_", suffix=".log", delete=False)
        log.close()
        solver = pulp.COIN_CMD(path="/usr/bin/cbc", msg=False, timeLimit=time_limit, options=CBC_OPTIONS,
                               logPath=log.name, warmStart=warm)
        t0 = time.time()
        self.prob.solve(solver)
        self.solve_s = time.time() - t0
        with open(log.name) as f:
            self.log = f.read()
        os.unlink(log.name)
        if msg:
            sys.stderr.write(self.log)
        self.status = parse_status(self.log, pulp.LpStatus[self.prob.status])
        self.bound = parse_bound(self.log)
        if self.bound is not None:  # CBC's objective leaves out the expression's constant
            self.bound += self.prob.objective.constant
        return self.status

    def evaluate(self):
        """CBC's solution: its actions, the step recomputed exactly from them (CBC prints 8
        significant digits), the peak of the live-byte expressions under CBC's own binaries, and
        how many of those binaries contradict the exact times."""
        xv = {v.name: int(round(v.value() or 0)) for row in self.x for v in row}
        times = self.exact_times(xv)
        val = dict(xv)
        bad = 0
        for b, lhs, rhs, e in self.orders:
            val[b.name] = int(round(b.value() or 0))
            if val[b.name] and lhs.value(times, xv) > rhs.value(times, xv) + 1e-9:
                bad += 1
        cval = {}
        for c, q, i, t, exprs in self.phases:
            p = sum(int(round(qq.value() or 0)) for qq in q)
            tv = t.value(times, xv)
            Ts = (times["BS%d" % i], self.RE(i).value(times, xv), self.BE(i).value(times, xv))
            if (p > 0 and Ts[p - 1] > tv + 1e-9) or (p < 3 and tv > Ts[p] + 1e-9):
                bad += 1
            cval[c.name] = sum(b * (xv[v.name] if v is not None else 1) for b, v in exprs[p])
        peak, where = self.peak_of_values(xv, val, cval)
        plan = [[xv[v.name] for v in row].index(1) for row in self.x]
        return {"step_ms": self.step_expr.value(times, xv), "step_ms_cbc": pulp.value(self.step),
                "peak_device_bytes": peak, "peak_at": where, "actions": [ACTIONS[a] for a in plan],
                "plan": plan, "violations": bad}


def parse_status(text, fallback):
    if "Result - Optimal solution found" in text:
        return "optimal"
    if "Result - Problem proven infeasible" in text or "Problem is infeasible" in text \
            or "Result - Linear relaxation infeasible" in text:
        return "infeasible"
    if "Result - Stopped on time limit" in text:
        return "time limit, no solution" if "No feasible solution found" in text else "time limit"
    return fallback.lower()


def parse_bound(text):
    for pat in (r"^Lower bound:\s+(\S+)", r"^Objective value:\s+(\S+)"):
        m = re.findall(pat, text, re.M)
        if m:
            try:
                return float(m[-1])
            except ValueError:
                pass
    return None


def parse_fix(text, n):
    names = [s.strip() for s in text.split(",")]
    if len(names) != n:
        raise SystemExit("--fix: %d actions for %d layers" % (len(names), n))
    for s in names:
        if s not in ACTIONS:
            raise SystemExit("--fix: unknown action '%s' (keep, offload, recompute, recompute+offload)" % s)
    return [ACTIONS.index(s) for s in names]


def normalise(sc, plan):
    """An offload with nothing to move is no offload, as the lowering decides (decide_fates)."""
    out = []
    for i, a in enumerate(plan):
        layer = sc["layers"][i]
        out.append(K_ if a == O_ and not layer["tensors"] else R_ if a == RO_ and layer["input"] == 0 else a)
    return out


def run_fixed(sc, sched, plan, time_limit=None, verbose=False):
    """The MIP with the plan fixed, minimising the peak: its times are forced, its order binaries
    free; started from the engine-order assignment, CBC proves nothing lower exists."""
    m = Model(sc, sched, None, fixed=plan, objective="peak")
    exact = m.assign(plan)
    m.solve(time_limit=time_limit, msg=verbose, warm=True)
    if m.status not in ("optimal", "time limit"):
        raise RuntimeError("fixed plan under %s: CBC says %s" % (sched, m.status))
    ev = m.evaluate()
    ev.update(schedule=sched, status=m.status, solve_s=m.solve_s, binaries=m.n_bin,
              peak_engine_order_bytes=exact["peak_device_bytes"])
    return ev


def neighbourhood(sc, sched, budget, plan, lo, hi, time_limit, verbose=False, margin=3):
    """Large-neighbourhood step: the same MIP with the actions outside layers [lo, hi) fixed to
    `plan`, and the order binaries of moments and items both far from the window fixed to their
    values under `plan` (a restriction: whatever CBC finds satisfies every row of the full model).
    Started from `plan`."""
    m = Model(sc, sched, budget)
    for i, row in enumerate(m.x):
        if not lo <= i < hi:
            for a, v in enumerate(row):
                v.lowBound = v.upBound = 1 if plan[i] == a else 0
    m.assign(plan)
    near = lambda l: lo - margin <= l < hi + margin
    byname = m.prob.variablesDict()
    for name, (j, i) in m.locus.items():
        if not near(j) and not near(i):
            v = byname[name]
            v.lowBound = v.upBound = v.varValue
    m.solve(time_limit=time_limit, msg=verbose, warm=True)
    return m


def run(sc, budget, schedules, time_limit=None, fixed=None, verbose=False, window=8, full_share=0.4, window_s=10.0):
    """The best plan over `schedules`.  Per schedule: one MIP over every plan, started from the
    best plan known that fits (keep/recompute only, or another schedule's), for a share of the time
    (its bound, and the optimum when CBC proves it); then, while time is left, windows of `window`
    layers re-optimised exactly with the rest fixed (neighbourhood), on the unproven schedules."""
    budget = min(budget, sc["memory"])
    t_start = time.time()
    left = lambda: None if time_limit is None else time_limit - (time.time() - t_start)
    if fixed is not None:
        plan = normalise(sc, fixed)
        per, best = {}, None
        for s in schedules:
            ev = run_fixed(sc, s, plan, time_limit, verbose)
            per[s] = ev
            if ev["peak_device_bytes"] <= budget and (best is None or ev["step_ms"] < best["step_ms"]):
                best = ev
        out = {k: best[k] for k in ("step_ms", "peak_device_bytes", "actions", "schedule")} if best else \
            {"step_ms": None, "peak_device_bytes": None, "actions": None, "schedule": None}
        out.update(status="fixed" if best else "infeasible", solve_s=time.time() - t_start,
                   bound_ms=out["step_ms"], budget_bytes=budget, per_schedule=per)
        return out

    per, starts, best = {}, [], None
    kr = Model(sc, "sync", budget, allow=(K_, R_))
    kr.solve(msg=verbose)
    if kr.status == "optimal":
        starts.append(kr.evaluate()["plan"])
    order = (["sync"] if "sync" in schedules else []) + [s for s in ASYNC_ORDER if s in schedules]
    n_async = len([s for s in order if s != "sync"])
    for s in order:
        lim = None
        if time_limit is not None and s != "sync":
            lim = max(1.0, full_share * left() / n_async)
        m = Model(sc, s, budget)
        warm, start_ms = None, None
        for plan in starts:
            ex = m.assign(plan)
            if ex["peak_device_bytes"] <= budget and (warm is None or ex["step_ms"] < start_ms):
                warm, start_ms = plan, ex["step_ms"]
        if warm is not None:
            m.assign(warm)
        m.solve(time_limit=lim, msg=verbose, warm=warm is not None)
        info = {"status": m.status, "solve_s": m.solve_s, "binaries": m.n_bin, "rows": len(m.prob.constraints),
                "columns": len(m.prob.variables()), "start_ms": start_ms, "windows": 0, "window_s": 0.0}
        if m.status in ("optimal", "time limit"):
            ev = m.evaluate()
            info.update({k2: ev[k2] for k2 in ("step_ms", "step_ms_cbc", "actions", "violations", "plan")})
            starts.append(ev["plan"])
        if m.status == "optimal":
            info["bound_ms"] = info["step_ms"]
        elif m.status == "infeasible":
            info["bound_ms"] = float("inf")
        else:
            info["bound_ms"] = min(m.bound if m.bound is not None else 0.0, info.get("step_ms", float("inf")))
        per[s] = info
    # neighbourhoods, best schedule first, until the time is up
    n = sc["n"]
    todo = [s for s in order if per[s]["status"] == "time limit"]
    todo.sort(key=lambda s: per[s]["step_ms"])
    while time_limit is not None and todo and left() > 2.0:
        improved = False
        for k, s in enumerate(list(todo)):
            info = per[s]
            # the best schedule gets most of the time: its neighbourhoods are the likeliest to win
            share = left() * (0.6 if k == 0 and len(todo) > 1 else 1.0 / (len(todo) - k))
            t_end = time.time() + share
            for lo in range(max(0, n - window), -1, -max(1, window // 2)):
                if time.time() > t_end - 1.0 or left() < 2.0:
                    break
                m = neighbourhood(sc, s, budget, info["plan"], lo, lo + window,
                                  max(1.0, min(t_end - time.time(), window_s)), verbose)
                info["windows"] += 1
                info["window_s"] += m.solve_s
                if m.status in ("optimal", "time limit"):
                    ev = m.evaluate()
                    if ev["step_ms"] < info["step_ms"] - 1e-9 and not ev["violations"]:
                        info.update({k2: ev[k2] for k2 in ("step_ms", "step_ms_cbc", "actions", "violations",
                                                           "plan")})
                        improved = True
        if not improved:
            break
    # what time is left: the whole MIP again, started from each unproven schedule's best plan
    todo = [s for s in order if per[s]["status"] == "time limit"]
    todo.sort(key=lambda s: per[s]["step_ms"])
    for k, s in enumerate(todo):
        if time_limit is None or left() < 5.0:
            break
        info = per[s]
        m = Model(sc, s, budget)
        m.assign(info["plan"])
        m.solve(time_limit=left() / (len(todo) - k), msg=verbose, warm=True)
        info["resolve_s"] = m.solve_s
        info["solve_s"] += m.solve_s
        if m.status in ("optimal", "time limit"):
            ev = m.evaluate()
            if ev["step_ms"] < info["step_ms"] - 1e-9 and not ev["violations"]:
                info.update({k2: ev[k2] for k2 in ("step_ms", "step_ms_cbc", "actions", "violations", "plan")})
        if m.status == "optimal":
            info["status"], info["bound_ms"] = "optimal", info["step_ms"]
        elif m.bound is not None:
            info["bound_ms"] = min(max(info["bound_ms"], m.bound), info["step_ms"])
    for s in order:
        if "step_ms" in per[s] and (best is None or per[s]["step_ms"] < best["step_ms"]):
            best = dict(per[s], schedule=s)
    floors = [per[s]["bound_ms"] for s in order]
    proven = all(per[s]["status"] in ("optimal", "infeasible") for s in order)
    bound = min(floors) if floors else None
    out = {"budget_bytes": budget, "per_schedule": per}
    if best is None:
        out.update(step_ms=None, peak_device_bytes=None, actions=None, schedule=None,
                   status="infeasible" if proven else "time limit, no solution", solve_s=time.time() - t_start,
                   bound_ms=None if bound == float("inf") else bound)
        return out
    exact = Model(sc, best["schedule"], budget).assign(best["plan"])
    out.update(step_ms=best["step_ms"], peak_device_bytes=exact["peak_device_bytes"], actions=best["actions"],
               schedule=best["schedule"], status="optimal" if proven else "time limit",
               solve_s=time.time() - t_start, bound_ms=best["step_ms"] if proven else min(bound, best["step_ms"]),
               step_ms_cbc=best["step_ms_cbc"], violations=best["violations"])
    for s in order:
        per[s].pop("plan", None)
    return out


def policy_block(result, name="mip"):
    a, p, k = SCHEDULES[result["schedule"]]
    lines = ["[policy.%s]" % name, "kind = plan", "mode = %s" % ("async" if a else "sync")]
    if a:
        lines += ["prefetch = %d" % p, "inflight = %d" % k]
    lines.append("actions = " + ", ".join(result["actions"]))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--budget", required=True, help="bytes, or a size with a unit (45GiB)")
    ap.add_argument("--schedule", default="all", choices=["all"] + list(SCHEDULES))
    ap.add_argument("--time-limit", type=float, default=None, help="seconds, all schedules together")
    ap.add_argument("--fix", default=None, help="comma-separated actions: this plan, its peak minimised")
    ap.add_argument("--verbose", action="store_true", help="CBC's log on stderr")
    args = ap.parse_args()
    try:
        sc = load(args.scenario)
        budget = int(args.budget) if args.budget.isdigit() else parse_size(args.budget)
    except (ScenarioError, OSError, ValueError) as e:
        print("mip_plan: %s" % e, file=sys.stderr)
        return 2
    schedules = list(SCHEDULES) if args.schedule == "all" else [args.schedule]
    fixed = parse_fix(args.fix, sc["n"]) if args.fix else None
    out = run(sc, budget, schedules, args.time_limit, fixed, args.verbose)
    first = ("step_ms", "peak_device_bytes", "actions", "schedule", "status", "solve_s", "bound_ms")
    out = dict([(k, out.get(k)) for k in first] + [(k, v) for k, v in out.items() if k not in first])
    print(json.dumps(out, indent=2))
    return 0 if out["step_ms"] is not None else 4


if __name__ == "__main__":
    sys.exit(main())

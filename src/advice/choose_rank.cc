// posenc/choose.h, the ranking: verdicts and order of the candidates, and
// whether each measured finding is stable across the committed runs ("a
// finding is called stable only if it holds in every committed run").
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "choose_internal.h"
#include "posenc/choose.h"

namespace posenc::advice {
namespace {

// Where two measured rows stand in each committed run that measured both at
// the multiple that answers the request.
struct Comparison {
  std::vector<std::string> a_ahead, b_ahead;  // "run a vs b" texts
  json values = json::object();
  bool any() const { return !values.empty(); }
};

Comparison CompareInRuns(const json& evidence, const std::string& a_name, const std::string& b_name,
                         double m) {
  Comparison c;
  for (const json& run : evidence["runs"]) {
    const json& rows = run["rows"];
    if (!rows.contains(a_name) || !rows.contains(b_name)) continue;
    const json& a = rows[a_name];
    const json& b = rows[b_name];
    const std::int64_t M = MultipleFor(a, m);
    const json* ea = EvalAt(a, M * a.value("train_length", std::int64_t{0}));
    const json* eb = EvalAt(b, M * b.value("train_length", std::int64_t{0}));
    if (!ea || !eb || !Number(*ea, "bits_per_byte") || !Number(*eb, "bits_per_byte")) continue;
    const double va = *Number(*ea, "bits_per_byte"), vb = *Number(*eb, "bits_per_byte");
    const std::string run_name = run.value("name", std::string("run"));
    c.values[run_name] = {{a_name, va}, {b_name, vb}};
    (va <= vb ? c.a_ahead : c.b_ahead)
        .push_back(Format("%s %.3f vs %.3f", run_name.c_str(), va, vb));
  }
  return c;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// One reason on `c` about its order against `other` (ranked above it).
void StabilityReason(Candidate& c, const std::string& other, const Comparison& k) {
  const json ev = Measured("docs/evidence/choose.json", "runs", k.values);
  if (k.b_ahead.empty()) {
    c.Reason(Format("stable: %s is ahead of it in every committed run that measured both (%s)",
                    other.c_str(), Join(k.a_ahead).c_str()),
             ev);
  } else if (k.a_ahead.empty()) {
    c.Reason(Format("it is ahead of %s in every committed run that measured both (%s), though "
                    "ranked below it here",
                    other.c_str(), Join(k.b_ahead).c_str()),
             ev);
  } else {
    c.Reason(Format("the committed runs disagree on it against %s: %s is ahead in %s; it is "
                    "ahead in %s",
                    other.c_str(), other.c_str(), Join(k.a_ahead).c_str(), Join(k.b_ahead).c_str()),
             ev);
  }
}

}  // namespace

// After the ranking: each measured candidate's order against the top one
// and against the measured candidate just above it, in every committed run
// ("stable" or "the runs disagree"); the top one gets a summary.
void AddStability(std::vector<Candidate>& cs, const json& evidence, double m) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].measured && !cs[i].ruled_out) idx.push_back(i);
  }
  if (idx.size() < 2) return;
  const std::string top = cs[idx[0]].scheme;
  std::vector<std::string> disagree;
  int compared = 0;
  for (std::size_t n = 1; n < idx.size(); ++n) {
    Candidate& c = cs[idx[n]];
    const Comparison k = CompareInRuns(evidence, top, c.scheme, m);
    if (k.any()) {
      StabilityReason(c, top, k);
      ++compared;
      if (!k.b_ahead.empty()) disagree.push_back(c.scheme);
    }
    const std::string& above = cs[idx[n - 1]].scheme;
    if (n >= 2) {
      const Comparison kn = CompareInRuns(evidence, above, c.scheme, m);
      if (kn.any()) StabilityReason(c, above, kn);
    }
  }
  if (compared == 0) return;
  cs[idx[0]].Reason(
      disagree.empty()
          ? Format("stable: ahead of the %d other measured candidates in every committed run "
                   "that measured both",
                   compared)
          : Format("ahead in the default run; the committed runs disagree on its order against "
                   "%s (see their reasons)",
                   Join(disagree).c_str()),
      Measured("docs/evidence/choose.json", "runs", compared));
}

void Rank(std::vector<Candidate>& cs) {
  double best = std::numeric_limits<double>::infinity();
  for (const Candidate& c : cs) {
    if (c.measured && !c.ruled_out && !c.capped) best = std::min(best, c.score);
  }
  const bool any_measured = std::isfinite(best);
  for (Candidate& c : cs) {
    if (c.ruled_out) {
      c.verdict = "ruled out";
    } else if (c.measured) {
      c.verdict =
          !c.capped && c.score <= best * (1 + kChooseTolerance) ? "recommended" : "possible";
      if (c.verdict == "recommended" && c.score > best) {
        c.Reason(Format("within %.0f %% of the best measured score (%.3f): the measurement "
                        "cannot tell them apart",
                        100 * kChooseTolerance, best),
                 Citation("choose.h kChooseTolerance"));
      }
    } else {
      // Literature: its own verdict, capped; never above a measured recommendation.
      c.verdict = (!c.capped && !any_measured && c.literature_verdict == "recommended")
                      ? "recommended"
                      : "possible";
    }
  }
  auto rank_of = [](const Candidate& c) {
    if (c.verdict == "recommended") return 0;
    if (c.verdict == "possible") return c.measured ? 1 : 2;
    return c.measured ? 3 : 4;
  };
  std::stable_sort(cs.begin(), cs.end(), [&](const Candidate& a, const Candidate& b) {
    const int ra = rank_of(a), rb = rank_of(b);
    if (ra != rb) return ra < rb;
    if (a.measured && b.measured && a.score != b.score) return a.score < b.score;
    return a.order < b.order;
  });
}

}  // namespace posenc::advice

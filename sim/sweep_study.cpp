// The `simulate` study runner as the evaluator of sweep and tune points, and small helpers.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "sparsp/sweep.hpp"

namespace sparsp::sim {

using nlohmann::json;

Result<ScoreFn> score_from_evaluator(PointEvaluator evaluator, const std::string& column,
                                     size_t row) {
  size_t col = evaluator.columns.size();
  for (size_t c = 0; c < evaluator.columns.size(); ++c)
    if (evaluator.columns[c] == column) col = c;
  if (col == evaluator.columns.size()) {
    std::string known;
    for (const auto& c : evaluator.columns) known += (known.empty() ? "" : ", ") + c;
    return input_error("tune", "/objective", "unknown metric \"" + column + "\" (known: " + known + ")");
  }
  auto eval = std::move(evaluator.evaluate);
  return ScoreFn([eval, col, row, column](const SweepPoint& p) {
    const PointOutcome o = eval(p);
    if (o.skipped) return Score{false, 0, o.reason};
    if (row >= o.rows.size())
      return Score{false, 0, "no row " + std::to_string(row) + " in the result"};
    const auto& cells = o.rows[row];
    if (col >= cells.size()) return Score{false, 0, "no " + column + " in the result"};
    try {
      const json v = json::parse(cells[col]);
      if (!v.is_number()) return Score{false, 0, column + " is not a number: " + cells[col]};
      return Score{true, v.get<double>(), ""};
    } catch (const json::exception&) {
      return Score{false, 0, column + " is not a number: " + cells[col]};
    }
  });
}

Status write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Error{path + ": cannot write (" + tmp + ")", 1};
    out << text;
    out.flush();
    if (!out) return Error{path + ": write failed", 1};
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Error{path + ": cannot rename from " + tmp + ": " + ec.message(), 1};
  return Ok{};
}

#if !__has_include("sparsp/study.hpp")
bool study_runner_available() { return false; }
Result<PointEvaluator> study_point_evaluator() {
  return Error{"sweep: this build has no `simulate` study runner", 1};
}
Result<ScoreFn> study_score(const std::string&, const std::string&) {
  return Error{"tune: this build has no `simulate` study runner", 1};
}
#endif

}  // namespace sparsp::sim

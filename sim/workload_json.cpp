// Workload JSON reader (schema in sim/README.md). Strict: unknown fields are errors, so typos
// never pass silently. Errors: "<file>:<JSON pointer>: <what>" or "<file>:<line>: <what>".
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "sparsp/sim.hpp"
#include "sparsp/units.hpp"

namespace sparsp::sim {
namespace {

using json = nlohmann::json;

struct Reader {
  const std::string& file;
  Error err;
  bool failed = false;

  bool fail(const std::string& place, const std::string& what) {
    if (!failed) err = input_error(file, place, what);
    failed = true;
    return false;
  }
  bool check_keys(const json& obj, const std::string& place, const std::set<std::string>& allowed) {
    if (!obj.is_object()) return fail(place, "expected an object");
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (!allowed.count(it.key()))
        return fail(place + "/" + it.key(), "unknown field '" + it.key() + "'");
    return true;
  }
  bool string_field(const json& obj, const std::string& place, const char* key, std::string& out,
                    bool required) {
    auto it = obj.find(key);
    if (it == obj.end())
      return required ? fail(place, std::string("missing field '") + key + "'") : true;
    if (!it->is_string()) return fail(place + "/" + key, "expected a string");
    out = it->get<std::string>();
    return true;
  }
  bool number_field(const json& obj, const std::string& place, const char* key, double& out,
                    bool required, double scale = 1.0) {
    auto it = obj.find(key);
    if (it == obj.end())
      return required ? fail(place, std::string("missing field '") + key + "'") : true;
    if (!it->is_number()) return fail(place + "/" + key, "expected a number");
    const double x = it->get<double>();
    if (!(x >= 0) || !std::isfinite(x))
      return fail(place + "/" + key, "expected a number >= 0, got " + it->dump());
    out = x * scale;
    return true;
  }
  bool int_field(const json& obj, const std::string& place, const char* key, int& out, int min) {
    auto it = obj.find(key);
    if (it == obj.end()) return true;
    if (!it->is_number_integer()) return fail(place + "/" + key, "expected an integer");
    const auto x = it->get<int64_t>();
    if (x < min || x > 1000000)
      return fail(place + "/" + key,
                  "expected an integer >= " + std::to_string(min) + ", got " + it->dump());
    out = static_cast<int>(x);
    return true;
  }
  bool after_field(const json& obj, const std::string& place, std::vector<std::string>& out,
                   const char* key = "after") {
    auto it = obj.find(key);
    if (it == obj.end()) return true;
    const std::string at = place + "/" + key;
    if (!it->is_array()) return fail(at, "expected an array of ids");
    for (size_t j = 0; j < it->size(); ++j) {
      if (!(*it)[j].is_string()) return fail(at + "/" + std::to_string(j), "expected an id string");
      std::string id = (*it)[j].get<std::string>();
      const auto first = std::find(out.begin(), out.end(), id);
      if (first != out.end())
        return fail(at + "/" + std::to_string(j), "duplicate id '" + id + "' (also at index " +
                                                      std::to_string(first - out.begin()) + ")");
      out.push_back(std::move(id));
    }
    return true;
  }
};

Status parse_collective_tag(const json& j, const std::string& file, const std::string& place,
                            CollectiveTag& out) {
  if (!j.is_object()) return input_error(file, place, "expected an object {op, ranks, bytes}");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "op" && it.key() != "ranks" && it.key() != "bytes")
      return input_error(file, place + "/" + it.key(), "unknown field '" + it.key() + "'");
  for (const char* k : {"op", "ranks", "bytes"})
    if (!j.contains(k)) return input_error(file, place, std::string("missing field '") + k + "'");
  const json& op = j["op"];
  if (!op.is_string() || !nccl::parse_collective(op.get<std::string>(), &out.op))
    return input_error(file, place + "/op",
                       "expected \"all_to_all\", \"all_gather\", \"reduce_scatter\", "
                       "\"all_reduce\" or \"send_recv\", got " +
                           op.dump());
  const json& r = j["ranks"];
  if (!r.is_number_integer() || r.get<int64_t>() < 2 || r.get<int64_t>() > 1000000)
    return input_error(file, place + "/ranks", "expected an integer >= 2, got " + r.dump());
  out.ranks = static_cast<int>(r.get<int64_t>());
  const json& b = j["bytes"];
  if (!b.is_number() || !(b.get<double>() > 0) || !std::isfinite(b.get<double>()) ||
      b.get<double>() > 1125899906842624.0)
    return input_error(file, place + "/bytes",
                       "expected bytes > 0 (at most 2^50), got " + b.dump());
  out.bytes = b.get<double>();
  out.set = true;
  return Ok{};
}

}  // namespace

Result<CollectiveTag> parse_collective_tag_json(const std::string& text, const std::string& file,
                                                const std::string& place) {
  CollectiveTag tag;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    return input_error(file, place, "invalid JSON");
  }
  if (auto s = parse_collective_tag(j, file, place, tag); !s) return s.error();
  return tag;
}

std::string collective_tag_json(const CollectiveTag& tag) {
  nlohmann::ordered_json j;
  j["op"] = nccl::collective_name(tag.op);
  j["ranks"] = tag.ranks;
  j["bytes"] = tag.bytes;
  return j.dump();
}

Result<Workload> parse_workload(const std::string& text, const std::string& source_name) {
  auto parsed = parse_json<json>(text, source_name);
  if (!parsed) return parsed.error();
  const json& doc = *parsed;
  Reader rd{source_name, {}, false};
  Workload w;
  w.source = source_name;
  if (!rd.check_keys(doc, "", {"schema_version", "transfers", "compute", "comment"})) return rd.err;
  auto sv = doc.find("schema_version");
  if (sv == doc.end()) return input_error(source_name, "/schema_version", "missing (expected 1)");
  if (!sv->is_number_integer() || sv->get<int64_t>() != 1)
    return input_error(source_name, "/schema_version", "expected 1, got " + sv->dump());
  if (auto ts = doc.find("transfers"); ts != doc.end()) {
    if (!ts->is_array()) return input_error(source_name, "/transfers", "expected an array");
    for (size_t i = 0; i < ts->size(); ++i) {
      const json& o = (*ts)[i];
      const std::string place = "/transfers/" + std::to_string(i);
      Transfer t;
      double cap_GBps = 0;
      std::string engine = "ce", route = "auto", driver, staging = "pipelined";
      const bool ok = rd.check_keys(o, place,
                                    {"id",
                                     "src",
                                     "dst",
                                     "bytes",
                                     "after",
                                     "engine",
                                     "stream",
                                     "route",
                                     "rate_cap_GBps",
                                     "chunk_bytes",
                                     "staging_buffers",
                                     "comm_sms",
                                     "copy_engine",
                                     "layer",
                                     "kv_blocks",
                                     "driver",
                                     "staging",
                                     "collective",
                                     "released_by_last_wave",
                                     "comment"}) &&
                      rd.string_field(o, place, "id", t.id, true) &&
                      rd.string_field(o, place, "src", t.src, true) &&
                      rd.string_field(o, place, "dst", t.dst, true) &&
                      rd.number_field(o, place, "bytes", t.bytes, true) &&
                      rd.after_field(o, place, t.after) &&
                      rd.after_field(o, place, t.released_by_last_wave, "released_by_last_wave") &&
                      rd.string_field(o, place, "engine", engine, false) &&
                      rd.string_field(o, place, "stream", t.stream, false) &&
                      rd.string_field(o, place, "route", route, false) &&
                      rd.string_field(o, place, "driver", driver, false) &&
                      rd.string_field(o, place, "staging", staging, false) &&
                      rd.number_field(o, place, "rate_cap_GBps", cap_GBps, false) &&
                      rd.number_field(o, place, "chunk_bytes", t.chunk_bytes, false) &&
                      rd.int_field(o, place, "staging_buffers", t.staging_buffers, 1) &&
                      rd.int_field(o, place, "comm_sms", t.comm_sms, 0) &&
                      rd.int_field(o, place, "copy_engine", t.copy_engine, 0) &&
                      rd.int_field(o, place, "layer", t.layer, -1);
      if (!ok) return rd.err;
      t.rate_cap_Bps = units::GBps_to_Bps(cap_GBps);
      if (engine == "ce")
        t.engine = Engine::ce;
      else if (engine == "sm")
        t.engine = Engine::sm;
      else if (engine == "host")
        t.engine = Engine::host;
      else
        return input_error(source_name, place + "/engine",
                           "expected \"ce\", \"sm\" or \"host\", got \"" + engine + "\"");
      if (route == "auto")
        t.route = topology::RouteMode::automatic;
      else if (route == "p2p")
        t.route = topology::RouteMode::p2p;
      else if (route == "host_staged")
        t.route = topology::RouteMode::host_staged;
      else
        return input_error(source_name, place + "/route",
                           "expected \"auto\", \"p2p\" or \"host_staged\", got \"" + route + "\"");
      if (driver.empty() && o.contains("driver"))
        return input_error(source_name, place + "/driver", "expected \"src\" or \"dst\", got \"\"");
      if (driver == "src")
        t.driver = Driver::src;
      else if (driver == "dst")
        t.driver = Driver::dst;
      else if (!driver.empty())
        return input_error(source_name, place + "/driver",
                           "expected \"src\" or \"dst\", got \"" + driver + "\"");
      if (staging == "pipelined")
        t.staging = Staging::pipelined;
      else if (staging == "driver")
        t.staging = Staging::driver;
      else
        return input_error(source_name, place + "/staging",
                           "expected \"pipelined\" or \"driver\", got \"" + staging + "\"");
      if (auto cj = o.find("collective"); cj != o.end())
        if (auto st = parse_collective_tag(*cj, source_name, place + "/collective", t.collective);
            !st)
          return st.error();
      if (auto kv = o.find("kv_blocks"); kv != o.end()) {
        if (!kv->is_array())
          return input_error(source_name, place + "/kv_blocks", "expected an array of integers");
        for (size_t j = 0; j < kv->size(); ++j) {
          if (!(*kv)[j].is_number_integer())
            return input_error(source_name, place + "/kv_blocks/" + std::to_string(j),
                               "expected an integer");
          t.kv_blocks.push_back(static_cast<int32_t>((*kv)[j].get<int64_t>()));
        }
      }
      w.transfers.push_back(std::move(t));
    }
  }
  if (auto cs = doc.find("compute"); cs != doc.end()) {
    if (!cs->is_array()) return input_error(source_name, "/compute", "expected an array");
    for (size_t i = 0; i < cs->size(); ++i) {
      const json& o = (*cs)[i];
      const std::string place = "/compute/" + std::to_string(i);
      ComputeTask c;
      const bool ok =
          rd.check_keys(o, place,
                        {"id", "gpu", "duration_s", "flops", "after", "stream", "layer",
                         "last_wave_fraction", "comment"}) &&
          rd.string_field(o, place, "id", c.id, true) &&
          rd.string_field(o, place, "gpu", c.gpu, true) &&
          rd.number_field(o, place, "duration_s", c.duration_s, false) &&
          rd.number_field(o, place, "flops", c.flops, false) && rd.after_field(o, place, c.after) &&
          rd.number_field(o, place, "last_wave_fraction", c.last_wave_fraction, false) &&
          rd.string_field(o, place, "stream", c.stream, false) &&
          rd.int_field(o, place, "layer", c.layer, -1);
      if (!ok) return rd.err;
      if (!o.contains("duration_s") && !o.contains("flops"))
        return input_error(source_name, place, "needs 'duration_s' or 'flops'");
      if (o.contains("duration_s") && o.contains("flops"))
        return input_error(source_name, place, "give 'duration_s' or 'flops', not both");
      if (c.last_wave_fraction > 1)
        return input_error(source_name, place + "/last_wave_fraction",
                           "expected a fraction in 0..1, got " + json(c.last_wave_fraction).dump());
      if (c.duration_s > 1e6)  // as a plan's compute (1e300 gave "makespan: 1e+300 s")
        return input_error(source_name, place + "/duration_s",
                           "expected seconds in 0..1e6, got " + json(c.duration_s).dump());
      w.compute.push_back(std::move(c));
    }
  }
  return w;
}

Result<Workload> load_workload(const std::string& path) {
  auto text = read_text_file(path, "workload file");
  if (!text) return text.error();
  return parse_workload(*text, path);
}

const char* task_kind_name(TaskKind k) {
  switch (k) {
    case TaskKind::attention:
      return "attention";
    case TaskKind::gemm:
      return "gemm";
    case TaskKind::copy:
      return "copy";
    case TaskKind::other:
      return "other";
  }
  return "other";
}

}  // namespace sparsp::sim

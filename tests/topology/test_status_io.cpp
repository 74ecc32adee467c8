// The shared input-file helpers of include/sparsp/status.hpp (read_text_file, invalid_json,
// parse_json), used by every loader (topology, model, study, sweep, tune, workload, plan).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "sparsp/status.hpp"

namespace fs = std::filesystem;
using sparsp::parse_json;
using sparsp::read_text_file;

namespace {

// A fresh file under this test process's TMPDIR holding exactly `bytes`.
std::string temp_file(const std::string& name, const std::string& bytes) {
  const fs::path p = fs::temp_directory_path() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

template <class Json = nlohmann::json>
std::string parse_error_of(const std::string& text) {
  auto r = parse_json<Json>(text, "t.json");
  if (r.ok()) return "<ok>";
  CHECK(r.error().exit_code == 2);
  return r.error().message;
}

}  // namespace

TEST_CASE("read_text_file returns the bytes unchanged") {
  // CR LF, a NUL and no final newline all survive (binary read, no translation).
  const std::string bytes = std::string("a\r\nb\0c", 6);
  auto r = read_text_file(temp_file("status_io_bytes.txt", bytes));
  REQUIRE(r.ok());
  CHECK(*r == bytes);
  auto empty = read_text_file(temp_file("status_io_empty.txt", ""));
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("read_text_file: a missing file or a directory is one clear line") {
  auto r = read_text_file("/nonexistent/x.json");
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message == "/nonexistent/x.json: cannot open file");
  r = read_text_file("/nonexistent/w.json", "workload file");
  REQUIRE(!r.ok());
  CHECK(r.error().message == "/nonexistent/w.json: cannot open workload file");
  const std::string dir = fs::temp_directory_path().string();
  r = read_text_file(dir, "study file");
  REQUIRE(!r.ok());
  CHECK(r.error().exit_code == 2);
  CHECK(r.error().message == dir + ": is a directory, not a study file");
}

TEST_CASE("a JSON syntax error names the line of the character parsing stopped at") {
  // The stray ',' is on line 3 (two '\n' before it); nlohmann's own text is kept without its
  // "[json.exception.parse_error.101] " prefix.
  const std::string e = parse_error_of("{\n  \"a\": 1,\n  \"b\": ,\n}\n");
  CHECK(e.rfind("t.json:3: invalid JSON: parse error at line 3, column 8: ", 0) == 0);
  CHECK(e.find("[json.exception") == std::string::npos);
  // Parsing stops at the '\n' that ends the bad literal `tru` on line 2 (nlohmann's own
  // position, "line 3, column 0", is after that '\n'): the line to look at is 2.
  CHECK(parse_error_of("{\n  \"a\": tru\n}").rfind("t.json:2: invalid JSON: ", 0) == 0);
  // Empty text: end of input at byte 1 -> line 1. A truncated object "{\n" ends on line 2.
  CHECK(parse_error_of("").rfind("t.json:1: invalid JSON: ", 0) == 0);
  CHECK(parse_error_of("{\n").rfind("t.json:2: invalid JSON: ", 0) == 0);
  // Same for ordered_json (plans keep key order).
  CHECK(
      parse_error_of<nlohmann::ordered_json>("[1,\n\n2,,]").rfind("t.json:3: invalid JSON: ", 0) ==
      0);
}

TEST_CASE("a number out of range is an error at its JSON pointer, not an exception") {
  // nlohmann throws out_of_range.406 (no byte position) for 1e999, which overflows a double;
  // the parser callback's position names the value instead of a line.
  CHECK(parse_error_of("{\"a\": 1e999}") ==
        "t.json:/a: invalid JSON: number overflow parsing '1e999'");
  CHECK(parse_error_of("{\"a\": {\"b\": [1, 2,\n 1e999]}}") ==
        "t.json:/a/b/2: invalid JSON: number overflow parsing '1e999'");
  CHECK(parse_error_of("1e999") == "t.json: invalid JSON: number overflow parsing '1e999'");
}

TEST_CASE("parse_json returns the document, invalid_json formats any message") {
  auto r = parse_json<nlohmann::ordered_json>(R"({"b": 1, "a": [2]})", "t.json");
  REQUIRE(r.ok());
  CHECK(r->dump() == R"({"b":1,"a":[2]})");  // ordered_json keeps the file's key order
  // byte 5 is text[4] = 'c', after the '\n' at [1] and [3] -> line 3.
  CHECK(sparsp::invalid_json("f", "[json.exception.parse_error.101] parse error x", "a\nb\nc", 5)
            .message == "f:3: invalid JSON: parse error x");
  CHECK(sparsp::invalid_json("f", "no prefix").message == "f: invalid JSON: no prefix");
}

// The quantization report: JSON for tools, an HTML table for people; tensors worst SQNR first.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "driver/quantize/quantize_model.h"

namespace kiln {
namespace {

// JSON has no infinities: identical tensors report null SQNR.
nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json to_json(const TensorAccuracy& a, bool calibrated) {
  nlohmann::json j = {{"name", a.name}, {"node", a.node}, {"op", a.op},
                      {"sqnr_db", number_or_null(a.sqnr_db)}, {"cosine", a.cosine}};
  if (calibrated) {
    j["range"] = {a.range.lo, a.range.hi};
    j["scale"] = a.scale;
    j["zero_point"] = a.zero_point;
  }
  return j;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v;
  return o.str();
}

void html_table(std::ostream& o, const std::vector<TensorAccuracy>& rows, bool calibrated) {
  o << "<table><tr><th>tensor</th><th>producer</th><th>op</th><th>SQNR (dB)</th><th>cosine</th>";
  if (calibrated) o << "<th>range</th><th>scale</th><th>zero point</th>";
  o << "</tr>\n";
  for (const auto& a : rows) {
    const char* cls = a.sqnr_db < 10 ? " class=bad" : a.sqnr_db < 20 ? " class=warn" : "";
    o << "<tr" << cls << "><td>" << html_escape(a.name) << "</td><td>" << html_escape(a.node) << "</td><td>"
      << html_escape(a.op) << "</td><td>" << fixed(a.sqnr_db, 2) << "</td><td>" << fixed(a.cosine, 6) << "</td>";
    if (calibrated)
      o << "<td>[" << a.range.lo << ", " << a.range.hi << "]</td><td>" << a.scale << "</td><td>" << a.zero_point
        << "</td>";
    o << "</tr>\n";
  }
  o << "</table>\n";
}

}  // namespace

void write_quantize_report(const QuantizeModelResult& r, const std::string& model_path, const std::string& path) {
  std::ofstream f(path);
  if (!f) throw Error(ErrorKind::kUsage, "--report " + path + ": cannot write");
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (json) {
    nlohmann::json j;
    j["model"] = model_path;
    j["calibration_samples"] = r.samples;
    j["compared_samples"] = r.compared_samples;
    j["outputs"] = nlohmann::json::array();
    for (const auto& a : r.outputs) j["outputs"].push_back(to_json(a, false));
    j["tensors"] = nlohmann::json::array();
    for (const auto& a : r.tensors) j["tensors"].push_back(to_json(a, true));
    j["float_ops"] = nlohmann::json::array();
    for (const auto& [op, fo] : r.float_ops)
      j["float_ops"].push_back({{"op", op}, {"count", fo.nodes.size()}, {"why", fo.why}, {"nodes", fo.nodes}});
    j["notes"] = r.notes;
    f << j.dump(2) << "\n";
  } else {
    f << "<!doctype html><meta charset=utf-8><title>kiln quantize: " << html_escape(model_path) << "</title>\n"
      << "<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
         "padding:2px 6px;text-align:left}.bad{background:#fcc}.warn{background:#ffd}</style>\n"
      << "<h1>Quantization report: " << html_escape(model_path) << "</h1>\n"
      << "<p>Float model against the quantized model on " << r.compared_samples
      << " calibration samples. SQNR = 10 log10(sum x&sup2; / sum (x - x<sub>q</sub>)&sup2;): higher is better; "
         "below 20 dB is marked, below 10 dB red. Tensors worst first: candidates for --exclude.</p>\n"
      << "<h2>Model outputs</h2>\n";
    html_table(f, r.outputs, false);
    f << "<h2>Quantized activations</h2>\n";
    html_table(f, r.tensors, true);
    if (!r.float_ops.empty()) {
      f << "<h2>Left in float</h2>\n<table><tr><th>op</th><th>nodes</th><th>why</th><th>first nodes</th></tr>\n";
      for (const auto& [op, fo] : r.float_ops) {
        std::string names;
        for (size_t i = 0; i < fo.nodes.size() && i < 5; ++i) names += (i ? ", " : "") + fo.nodes[i];
        f << "<tr><td>" << html_escape(op) << "</td><td>" << fo.nodes.size() << "</td><td>" << html_escape(fo.why)
          << "</td><td>" << html_escape(names) << (fo.nodes.size() > 5 ? ", ..." : "") << "</td></tr>\n";
      }
      f << "</table>\n";
    }
    if (!r.notes.empty()) {
      f << "<h2>Notes</h2><ul>\n";
      for (const auto& n : r.notes) f << "<li>" << html_escape(n) << "</li>\n";
      f << "</ul>\n";
    }
  }
  if (!f) throw Error(ErrorKind::kUsage, "--report " + path + ": write failed");
}

}  // namespace kiln

#include "policy/json_positions.hpp"

#include <iterator>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

namespace exg::policy {

namespace {

using Json = nlohmann::ordered_json;

// An input iterator over the text that publishes how many bytes nlohmann's
// lexer has pulled so far; the SAX callbacks read that count to learn where
// the token they are told about ends.
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* p, const char* base, std::size_t* consumed)
      : p_(p), base_(base), consumed_(consumed) {}
  reference operator*() const { return *p_; }
  CountingIterator& operator++() {
    ++p_;
    *consumed_ = static_cast<std::size_t>(p_ - base_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const CountingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const CountingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char* base_;
  std::size_t* consumed_;
};

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Converts increasing byte offsets to line:column without rescanning the text.
class PosCursor {
 public:
  explicit PosCursor(std::string_view text) : text_(text) {
    if (text_.starts_with("\xEF\xBB\xBF")) off_ = 3;  // editors do not show a BOM as a column
  }
  TextPos at(std::size_t offset) {
    if (offset < off_) {  // never expected; stay correct anyway
      off_ = 0;
      pos_ = {1, 1};
    }
    for (; off_ < offset && off_ < text_.size(); ++off_) {
      char c = text_[off_];
      if (c == '\n') {
        ++pos_.line;
        pos_.column = 1;
      } else if (!is_continuation(c)) {
        ++pos_.column;
      }
    }
    return pos_;
  }

 private:
  std::string_view text_;
  std::size_t off_ = 0;
  TextPos pos_{1, 1};
};

class PositionedBuilder {
 public:
  static constexpr std::size_t kMaxDepth = 64;  // a policy needs about 4

  PositionedBuilder(std::string_view text, const std::size_t* consumed)
      : text_(text), consumed_(consumed), cursor_(text) {
    if (text_.starts_with("\xEF\xBB\xBF")) prev_end_ = 3;  // nlohmann skips a BOM
  }

  PositionedJson result;
  std::unique_ptr<JsonError> error;

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool v) { return put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return put(Json(v)); }
  bool string(Json::string_t& v) { return put(Json(std::move(v))); }
  bool binary(Json::binary_t&) { return fail("binary values are not JSON", token_start()); }

  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(Json::string_t& k) {
    TextPos pos = token_start();
    Frame& f = stack_.back();
    if (!f.keys.insert(k).second) {
      return fail("duplicate key \"" + k + "\"", pos);
    }
    pending_key_ = std::move(k);
    result.key_pos[f.pointer + "/" + json_pointer_token(pending_key_)] = pos;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    // ex.what() is "[json.exception.parse_error.101] parse error at line L, column C: why";
    // keep only "why": our own position replaces theirs.
    std::string what = ex.what();
    std::string why = what;
    if (auto c = what.find(", column "); c != std::string::npos) {
      if (auto colon = what.find(": ", c); colon != std::string::npos) why = what.substr(colon + 2);
    } else if (auto colon = what.find("] "); colon != std::string::npos) {
      why = what.substr(colon + 2);
    }
    // `position` counts the characters read, so the offending one is at position-1.
    std::size_t off = position > 0 ? position - 1 : 0;
    error = std::make_unique<JsonError>(JsonError{why, offset_to_pos(text_, off)});
    return false;
  }

 private:
  struct Frame {
    Json* node;
    std::string pointer;
    std::unordered_set<std::string> keys;  // objects: for duplicate detection
  };

  bool fail(std::string message, TextPos pos) {
    error = std::make_unique<JsonError>(JsonError{std::move(message), pos});
    return false;
  }

  // A token starts at the first byte after the previous token that is not
  // whitespace or a separator; the lexer has consumed the token by the time
  // we are called, so the consumed count becomes the next "previous end".
  // (For numbers the lexer reads one byte ahead; that byte is a separator,
  // whitespace or a closing bracket, so skipping it is harmless.)
  TextPos token_start() {
    std::size_t i = prev_end_;
    while (i < text_.size() && (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\n' ||
                                text_[i] == '\r' || text_[i] == ',' || text_[i] == ':')) {
      ++i;
    }
    prev_end_ = *consumed_;
    return cursor_.at(i);
  }

  // Places a value in its parent and returns a pointer to where it now lives.
  Json* place(Json&& v, std::string& pointer_out) {
    if (stack_.empty()) {
      result.root = std::move(v);
      pointer_out.clear();
      return &result.root;
    }
    Frame& parent = stack_.back();
    if (parent.node->is_array()) {
      pointer_out = parent.pointer + "/" + std::to_string(parent.node->size());
      parent.node->push_back(std::move(v));
      return &parent.node->back();
    }
    pointer_out = parent.pointer + "/" + json_pointer_token(pending_key_);
    Json& slot = (*parent.node)[pending_key_];
    slot = std::move(v);
    return &slot;
  }

  bool put(Json&& v) {
    TextPos pos = token_start();
    std::string pointer;
    place(std::move(v), pointer);
    result.value_pos[pointer] = pos;
    return true;
  }

  // Pointers into open containers stay valid: a container gets no new
  // siblings until it is closed.
  bool open(Json&& v) {
    TextPos pos = token_start();
    // Each open level costs a pointer string as long as the path to it, so an
    // absurdly deep (hostile) file would cost memory quadratic in its depth.
    if (stack_.size() >= kMaxDepth) {
      return fail("nested deeper than " + std::to_string(kMaxDepth) + " levels", pos);
    }
    std::string pointer;
    Json* node = place(std::move(v), pointer);
    result.value_pos[pointer] = pos;
    stack_.push_back(Frame{node, std::move(pointer), {}});
    return true;
  }

  bool close() {
    prev_end_ = *consumed_;
    stack_.pop_back();
    return true;
  }

  std::string_view text_;
  const std::size_t* consumed_;
  PosCursor cursor_;
  std::size_t prev_end_ = 0;
  std::vector<Frame> stack_;
  std::string pending_key_;
};

}  // namespace

TextPos offset_to_pos(std::string_view text, std::size_t offset) {
  return PosCursor(text).at(offset);
}

std::string json_pointer_token(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::expected<PositionedJson, JsonError> parse_json_with_positions(std::string_view text) {
  std::size_t consumed = 0;
  PositionedBuilder builder(text, &consumed);
  const char* b = text.data();
  CountingIterator first(b, b, &consumed);
  CountingIterator last(b + text.size(), b, &consumed);
  bool ok = Json::sax_parse(first, last, &builder, nlohmann::json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  if (!ok || builder.error) {
    if (builder.error) return std::unexpected(std::move(*builder.error));
    return std::unexpected(JsonError{"invalid JSON", offset_to_pos(text, consumed)});
  }
  return std::move(builder.result);
}

}  // namespace exg::policy

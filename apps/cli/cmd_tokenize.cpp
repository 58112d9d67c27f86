// vrun tokenize: ids (or pieces) of a text with a model's own tokenizer, and --decode back to text.
#if VRUN_COMMON
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>

#include "apps/cli/command.h"
#include "apps/common/tokenizer/chat_template.h"
#include "apps/common/tokenizer/loaders.h"
#include "apps/common/tokenizer/program_metadata.h"
#include "runtime/program.h"

namespace vrun::cli {
namespace {

struct Options {
  std::string model;
  std::vector<std::string> args;
  bool ids = false;
  bool pieces = false;
  bool decode = false;
  bool no_special = false;
  bool bos = false;
  bool skip_special = false;
  std::string chat;
  std::string system;
  bool print_prompt = false;
};

struct Loaded {
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::optional<std::string> chat_template;
};

Result<Loaded> load(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return err(ErrorCode::kIo, path, ": cannot open");
  char magic[8] = {};
  const size_t n = std::fread(magic, 1, sizeof(magic), f);
  std::fclose(f);
  Loaded loaded;
  if (n == sizeof(magic) && std::string_view(magic, 7) == "VRUNPRG") {
    VRUN_ASSIGN_OR_RETURN(auto program, load_program(path));
    const tok::ProgramMetadataView view(*program);
    VRUN_ASSIGN_OR_RETURN(loaded.tokenizer, tok::load_tokenizer(view, path));
    if (auto t = view.get_string(tok::keys::kChatTemplate)) loaded.chat_template = std::string(*t);
    return loaded;
  }
  VRUN_ASSIGN_OR_RETURN(loaded.tokenizer, tok::load_tokenizer_file(path));
  loaded.chat_template = tok::read_chat_template(path);
  return loaded;
}

int run(const Options& o) {
  auto loaded = load(o.model);
  if (!loaded.is_ok()) return fail("tokenize", loaded.status().message());
  const tok::Tokenizer& t = *loaded->tokenizer;

  if (o.decode) {
    std::vector<tok::TokenId> ids;
    std::vector<std::string> words = o.args;
    if (words.empty()) words.assign(std::istream_iterator<std::string>(std::cin), std::istream_iterator<std::string>());
    for (const std::string& w : words) {
      char* end = nullptr;
      const long v = std::strtol(w.c_str(), &end, 10);
      if (w.empty() || *end != '\0' || v < 0 || static_cast<size_t>(v) >= t.vocab_size()) {
        return fail("tokenize", "--decode: '" + w + "' is not a token id of " + o.model + " (0.." +
                                    std::to_string(t.vocab_size() - 1) + ")");
      }
      ids.push_back(static_cast<tok::TokenId>(v));
    }
    std::cout << t.decode(ids, o.skip_special) << "\n";
    return 0;
  }

  std::string text;
  if (o.args.empty()) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    for (size_t i = 0; i < o.args.size(); ++i) text += (i ? " " : "") + o.args[i];
  }
  bool allow_special = !o.no_special;
  if (!o.chat.empty()) {
    auto parsed = tok::parse_chat_format(o.chat);
    if (!parsed.is_ok()) return fail("tokenize", parsed.status().message());
    const tok::ChatFormat format = parsed->has_value() ? **parsed : tok::detect_chat_format(loaded->chat_template, t);
    std::vector<tok::ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", text});
    text = tok::render_chat(format, messages, /*add_generation_prompt=*/true);
    allow_special = true;  // the template's own markers
    if (o.print_prompt) {
      std::cout << "# chat template: " << tok::chat_format_name(format.kind) << "\n" << text << "\n";
      return 0;
    }
  }
  const auto ids = t.encode(text, tok::EncodeOptions{.allow_special = allow_special, .add_bos = o.bos});
  if (o.pieces) {
    for (tok::TokenId id : ids) std::cout << id << "\t" << t.id_to_piece(id) << "\n";
    return 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
  return 0;
}

const CommandRegistrar registrar(
    "tokenize", "Token ids of a text with a model's own tokenizer (or --decode ids to text)", [](CLI::App& sub) {
      auto o = std::make_shared<Options>();
      sub.add_option("-m,--model", o->model,
                     "Model or tokenizer: .vrp, .gguf, tokenizer.json, tokenizer.model (SentencePiece or tiktoken)")
          ->required();
      sub.add_option("args", o->args, "Text (joined by spaces; stdin when absent), or ids with --decode");
      sub.add_flag("--ids", o->ids, "Print the ids (the default)");
      sub.add_flag("--pieces", o->pieces, "Print one 'id<TAB>piece' line per token");
      sub.add_flag("--decode", o->decode, "Decode the given ids to text");
      sub.add_flag("--skip-special", o->skip_special, "With --decode: leave special tokens out");
      sub.add_flag("--no-special", o->no_special, "Tokenise special-token strings as plain text");
      sub.add_flag("--bos", o->bos, "Prepend the BOS token");
      sub.add_option("--chat", o->chat, "Wrap the text as one user turn: auto, raw, llama2, llama3, chatml");
      sub.add_option("--system", o->system, "With --chat: a system message");
      sub.add_flag("--print-prompt", o->print_prompt, "With --chat: print the rendered prompt, not ids");
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace vrun::cli
#endif  // VRUN_COMMON

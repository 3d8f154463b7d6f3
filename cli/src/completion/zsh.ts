import type { CommandInfo } from "../tree/describe.js";
import { shellHelpers } from "./bash.js";

/** `farm completion zsh`: `source <(farm completion zsh)` (after compinit). */
export function zshCompletion(tree: CommandInfo): string {
  return `#compdef farm
# farm zsh completion: source <(farm completion zsh)
${shellHelpers(tree)}
_farm() {
  local cur="\${words[CURRENT]}" prev="\${words[CURRENT-1]}" cmdpath="farm" i w
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    [[ "$w" == "--" ]] && break
    [[ "$w" == -* ]] && continue
    [[ " $(_farm_valued "$cmdpath") -o --output " == *" \${words[i-1]} "* ]] && continue
    [[ " $(_farm_subs "$cmdpath") " == *" $w "* ]] && cmdpath="$cmdpath $w"
  done
  if [[ " $(_farm_valued "$cmdpath") -o --output " == *" $prev "* ]]; then
    local choices="$(_farm_choices "$prev")"
    if [[ -n "$choices" ]]; then compadd -- \${=choices}; else _files; fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    local flags="$(_farm_flags "$cmdpath") --output --help"
    compadd -- \${=flags}
    return 0
  fi
  local subs="$(_farm_subs "$cmdpath")"
  if [[ -n "$subs" ]]; then compadd -- \${=subs}; else _files; fi
}
compdef _farm farm
`;
}

import type { CommandInfo } from "../tree/describe.js";
import { caseArms, completionData } from "./completion-data.js";

/** `farm completion bash`: `source <(farm completion bash)`. zsh reuses its helper functions. */
export function shellHelpers(tree: CommandInfo): string {
  const d = completionData(tree);
  const fn = (name: string, map: Map<string, string[]>) => [`${name}() {`, "  case \"$1\" in", caseArms(map, (k, w) => `    "${k}") echo "${w}" ;;`), "  esac", "}"].join("\n");
  return [fn("_farm_subs", d.subs), fn("_farm_flags", d.flags), fn("_farm_valued", d.valued), fn("_farm_choices", d.choices)].join("\n");
}

export function bashCompletion(tree: CommandInfo): string {
  return `# farm bash completion: source <(farm completion bash)
${shellHelpers(tree)}
_farm() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" cmdpath="farm" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == "--" ]] && break
    [[ "$w" == -* ]] && continue
    [[ " $(_farm_valued "$cmdpath") -o --output " == *" \${COMP_WORDS[i-1]} "* ]] && continue
    [[ " $(_farm_subs "$cmdpath") " == *" $w "* ]] && cmdpath="$cmdpath $w"
  done
  if [[ " $(_farm_valued "$cmdpath") -o --output " == *" $prev "* ]]; then
    local choices; choices="$(_farm_choices "$prev")"
    if [[ -n "$choices" ]]; then COMPREPLY=($(compgen -W "$choices" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_farm_flags "$cmdpath") --output --help" -- "$cur"))
    return 0
  fi
  local subs; subs="$(_farm_subs "$cmdpath")"
  if [[ -n "$subs" ]]; then COMPREPLY=($(compgen -W "$subs" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
}
complete -o default -F _farm farm
`;
}

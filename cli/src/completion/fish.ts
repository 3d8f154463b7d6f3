import type { CommandInfo } from "../tree/describe.js";
import { caseArms, completionData } from "./completion-data.js";

/** `farm completion fish`: save as ~/.config/fish/completions/farm.fish. */
export function fishCompletion(tree: CommandInfo): string {
  const d = completionData(tree);
  const fn = (name: string, map: Map<string, string[]>) => [`function ${name}`, "  switch $argv[1]", caseArms(map, (k, w) => `    case '${k}'\n      echo '${w}'`), "  end", "end"].join("\n");
  return `# farm fish completion: farm completion fish > ~/.config/fish/completions/farm.fish
${fn("__farm_subs", d.subs)}
${fn("__farm_flags", d.flags)}
${fn("__farm_valued", d.valued)}
${fn("__farm_choices", d.choices)}
function __farm_path
  set -l words (commandline -opc)
  set -l p farm
  set -l prev farm
  for w in $words[2..-1]
    if test "$w" = "--"
      break
    end
    if not string match -q -- '-*' $w
      if not contains -- $prev (string split ' ' -- (__farm_valued $p)) -o --output
        if contains -- $w (string split ' ' -- (__farm_subs $p))
          set p "$p $w"
        end
      end
    end
    set prev $w
  end
  echo $p
end
function __farm_complete
  set -l p (__farm_path)
  set -l tok (commandline -ct)
  set -l prev (commandline -opc)[-1]
  if contains -- $prev (string split ' ' -- (__farm_valued $p)) -o --output
    set -l choices (__farm_choices $prev)
    if test -n "$choices"
      string split ' ' -- $choices
    else
      __fish_complete_path $tok
    end
    return
  end
  if string match -q -- '-*' $tok
    string split ' ' -- (__farm_flags $p) --output --help
    return
  end
  set -l subs (__farm_subs $p)
  if test -n "$subs"
    string split ' ' -- $subs
  else
    __fish_complete_path $tok
  end
end
complete -c farm -f -a '(__farm_complete)'
`;
}

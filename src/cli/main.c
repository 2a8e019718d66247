/* ddpc command line: dispatches subcommands; parsing and exit codes live here and nowhere else. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        printf("usage: ddpc <train|bench|env> ...\n");
        return argc < 2 ? 2 : 0;
    }
    fprintf(stderr, "ddpc: unknown command '%s'\n", argv[1]);
    return 2;
}

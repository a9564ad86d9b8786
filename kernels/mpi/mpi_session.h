/* Constructor order inside an MPI binary: MPI_Init (session.c) first, then whatever needs
 * an initialised MPI before main() (the user-defined ops of reduce_user_op.c). */
#ifndef MPI_SESSION_H
#define MPI_SESSION_H

#define MPI_SESSION_PRIORITY 101
#define MPI_SESSION_AFTER_INIT 102

#endif
